package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// lockWaiters is how many backends of dsn's database wait for a lock.
func lockWaiters(t *testing.T, dsn string) int64 {
	var n int64
	sqlScan(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`, &n)
	return n
}

// ownerCounts is the owners' terminal counts that are not zero, as
// "owner=n,…" in owner order.
func ownerCounts(t *testing.T, dsn string) string {
	var counts string
	sqlScan(t, dsn, `SELECT coalesce(string_agg(owner || '=' || n, ',' ORDER BY owner), '') FROM bgtask_owner_terminal WHERE n <> 0`, &counts)
	return counts
}

// ageRecords marks the terminal records whose id matches like as
// terminal a day ago, and fails unless there are want of them.
func ageRecords(t *testing.T, dsn, like string, want int64) {
	t.Helper()
	if n := sqlExec(t, dsn, `UPDATE bgtask_tasks SET terminal_at = now() - interval '1 day' WHERE id LIKE $1 AND terminal_at IS NOT NULL`, like); n != want {
		t.Fatalf("%d aged records, want %d", n, want)
	}
}

// Store A has an age limit, and owner a three aged terminal records. B's
// group transaction holds a's terminal count (it ended a task of a) when
// A ends a task of b: that commit makes A check the age limit, whose
// deletes of a's aged records change a's count. B's late arrival then
// ends a task of b (b sorts after a, so it joins), or another task of a,
// whose retention (B keeps 4 terminal records an owner) deletes a's
// oldest record, an aged one. When the age statement ran in the commit's
// transaction, after the update that took b's count, that transaction
// held b's count and waited for a's, and B's held a's and waited for b's
// (or for the aged record the age statement held): a deadlock, which
// PostgreSQL broke after deadlock_timeout (40P01). The reaper's clean-up
// (A's, in place of the commit), one statement, held the aged records it
// deleted while it waited for a's count: with the retention, a deadlock
// too. The age limit's own transactions now take the counts first,
// holding nothing else.
func TestAgeLimitTakesNoCountOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cleanUp    bool            // A runs the reaper's clean-up, not a commit
		late       bgtype.TaskMeta // B's late arrival
		wantCounts string
	}{
		{"late takes b", false, rec("task_B_b", "b", bgtype.StatusCompleted), "a=1,b=2"},
		{"late deletes aged a", false, rec("task_B_a2", "a", bgtype.StatusCompleted), "a=2,b=1"},
		{"clean-up, late deletes aged a", true, rec("task_B_a2", "a", bgtype.StatusCompleted), "a=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testAgeLimitOrder(t, tc.cleanUp, tc.late, tc.wantCounts)
		})
	}
}

func testAgeLimitOrder(t *testing.T, cleanUp bool, late bgtype.TaskMeta, wantCounts string) {
	a, dsn := openStore(t, pgstore.WithRetainFor(time.Hour), pgstore.WithLoneCommitsAlone())
	pgstore.SetAgeDue(a, false)
	// One transaction slot, no age limit: B's group is the one
	// transaction that takes a's count then another.
	b := openMore(t, dsn, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithRetainPerOwner(4), pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	commit := upserter(ctx)
	for _, c := range []struct {
		s *pgstore.Store
		m bgtype.TaskMeta
	}{
		{a, rec("task_old_1", "a", bgtype.StatusCompleted)},
		{a, rec("task_old_2", "a", bgtype.StatusFailed)},
		{a, rec("task_old_3", "a", bgtype.StatusCompleted)},
		{a, rec("task_A_b", "b", bgtype.StatusRunning)},
		{b, rec("task_B_hold", "holder", bgtype.StatusRunning)},
		{b, rec("task_B_a", "a", bgtype.StatusRunning)},
		{b, rec(late.ID, late.Owner, bgtype.StatusRunning)},
	} {
		if err := commit(c.s, c.m); err != nil {
			t.Fatal(err)
		}
	}
	ageRecords(t, dsn, "task_old_%", 3)
	// B's one slot waits for the holder row the test locks, so that its
	// group's two commits queue behind it.
	tx, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_B_hold' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var bg background
	spawn := func(s *pgstore.Store, m bgtype.TaskMeta) { bg.run(m.ID, func() error { return commit(s, m) }) }
	held := rec("task_B_hold", "holder", bgtype.StatusRunning)
	held.Description = "held"
	spawn(b, held)
	waitFor(t, "B's slot waits for the held row", func() bool { return lockWaiters(t, dsn) == 1 })
	spawn(b, rec("task_B_a", "a", bgtype.StatusCompleted))
	spawn(b, rec("task_B_new", "a", bgtype.StatusRunning))
	waitQueued(t, b, 2)
	var once sync.Once
	pgstore.SetAfterOpen(b, func() {
		once.Do(func() {
			// B's transaction holds a's count: A's age limit waits
			// for it.
			if cleanUp {
				bg.run("clean-up", func() error { return pgstore.CleanUp(ctx, a) })
			} else {
				pgstore.SetAgeDue(a, true)
				spawn(a, rec("task_A_b", "b", bgtype.StatusCompleted))
			}
			waitFor(t, "A's age limit waits for a's count", func() bool { return lockWaiters(t, dsn) == 1 })
			spawn(b, late)
			waitQueued(t, b, 1)
		})
	})
	t.Cleanup(func() { pgstore.SetAfterOpen(b, nil) })
	d0 := pgstore.Deadlocks(a) + pgstore.Deadlocks(b)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	bg.wait(t)
	if !cleanUp {
		waitFor(t, "A's age pass", func() bool { return pgstore.AgePasses(a) == 1 })
	}
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b) - d0; n != 0 {
		t.Errorf("%d deadlocks, want 0", n)
	}
	if n := pgstore.LateCommits(b); n != 1 {
		t.Errorf("B: %d late commits joined, want 1", n)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id LIKE 'task_old_%'`); n != 0 {
		t.Errorf("%d aged records left, want 0", n)
	}
	if got := ownerCounts(t, dsn); got != wantCounts {
		t.Errorf("terminal counts %s, want %s", got, wantCounts)
	}
}

// A commit that makes a record terminal starts an age pass, which deletes
// the oldest retainAgeBatch (100) records past the age limit, of any
// owners, and keeps the younger ones; the next due pass deletes the rest.
func TestAgeLimitDeletesAgedRecords(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithRetainFor(time.Hour))
	pgstore.SetAgeDue(s, false)
	ctx := t.Context()
	var acts []store.Action
	for i := range 150 {
		acts = append(acts, store.UpsertAction(rec(fmt.Sprintf("task_old_%03d", i), "a", bgtype.StatusCompleted)))
	}
	if err := s.Commit(ctx, "a", acts...); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := s.Commit(ctx, "b", store.UpsertAction(rec(fmt.Sprintf("task_young_%d", i), "b", bgtype.StatusCompleted))); err != nil {
			t.Fatal(err)
		}
	}
	// 50 of owner a and 60 of owner c aged, the oldest first by id.
	for i := range 60 {
		m := rec(fmt.Sprintf("task_old_c%02d", i), "c", bgtype.StatusCompleted)
		if err := s.Commit(ctx, "c", store.UpsertAction(m)); err != nil {
			t.Fatal(err)
		}
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET terminal_at = now() - interval '2 days' + substr(id, 10)::int * interval '1 second' WHERE id LIKE 'task_old_%' AND owner = 'a';
		UPDATE bgtask_tasks SET terminal_at = now() - interval '1 day' + substr(id, 11)::int * interval '1 second' WHERE owner = 'c'`)
	count := func(sql string) int64 { return sqlExec(t, dsn, sql) }
	if n := count(`SELECT 1 FROM bgtask_tasks WHERE terminal_at < now() - interval '1 hour'`); n != 210 {
		t.Fatalf("%d aged records, want 210", n)
	}
	for pass, want := range []struct {
		a, c  int64
		count string
	}{
		{50, 60, "a=50,b=11,c=60"}, // 100 of a, the oldest
		{0, 10, "b=12,c=10"},       // a's last 50 and 50 of c
		{0, 0, "b=13"},             // c's last 10
	} {
		pgstore.SetAgeDue(s, true)
		if err := s.Commit(ctx, "b", store.UpsertAction(rec(fmt.Sprintf("task_young_x%d", pass), "b", bgtype.StatusCompleted))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the age pass", func() bool { return pgstore.AgePasses(s) == int64(pass+1) })
		pgstore.SetAgeDue(s, false)
		for _, c := range []struct {
			owner string
			want  int64
		}{{"a", want.a}, {"c", want.c}} {
			if n := count(`SELECT 1 FROM bgtask_tasks WHERE owner = '` + c.owner + `'`); n != c.want {
				t.Errorf("pass %d: %d records of %s, want %d", pass, n, c.owner, c.want)
			}
		}
		if n := count(`SELECT 1 FROM bgtask_tasks WHERE owner = 'b'`); n != int64(11+pass) {
			t.Errorf("pass %d: %d records of b, want %d", pass, n, 11+pass)
		}
		if got := ownerCounts(t, dsn); got != want.count {
			t.Errorf("pass %d: terminal counts %s, want %s", pass, got, want.count)
		}
	}
}

// A group whose commit starts an age pass admits a late arrival that ends
// a task: the pass runs in a transaction of its own, not the group's.
func TestAgedGroupAdmitsLateArrivals(t *testing.T) {
	t.Parallel()
	s, dsn := openStoreDSN(t, "pool_max_conns=1", pgstore.WithRetainFor(time.Hour), pgstore.WithLoneCommitsAlone())
	pgstore.SetAgeDue(s, false)
	ctx := t.Context()
	for _, m := range []bgtype.TaskMeta{
		rec("task_hold", "holder", bgtype.StatusRunning),
		rec("task_b", "b", bgtype.StatusRunning),
		rec("task_c", "c", bgtype.StatusRunning),
		rec("task_old", "a", bgtype.StatusCompleted),
	} {
		if err := s.Commit(ctx, m.Owner, store.UpsertAction(m)); err != nil {
			t.Fatal(err)
		}
	}
	ageRecords(t, dsn, "task_old", 1)
	tx, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_hold' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var bg background
	spawn := func(m bgtype.TaskMeta) {
		bg.run(m.ID, func() error { return s.Commit(ctx, m.Owner, store.UpsertAction(m)) })
	}
	held := rec("task_hold", "holder", bgtype.StatusRunning)
	held.Description = "held"
	spawn(held)
	waitFor(t, "the slot waits for the held row", func() bool { return lockWaiters(t, dsn) == 1 })
	pgstore.SetAgeDue(s, true)
	spawn(rec("task_b", "b", bgtype.StatusCompleted))
	spawn(rec("task_b_new", "b", bgtype.StatusRunning))
	waitQueued(t, s, 2)
	var once sync.Once
	pgstore.SetAfterOpen(s, func() {
		once.Do(func() {
			spawn(rec("task_c", "c", bgtype.StatusCompleted))
			waitQueued(t, s, 1)
		})
	})
	t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	bg.wait(t)
	waitFor(t, "the group's age pass", func() bool { return pgstore.AgePasses(s) == 1 })
	if n := pgstore.LateCommits(s); n != 1 {
		t.Errorf("%d late commits joined, want 1", n)
	}
	if groups, commits := pgstore.Groups(s); groups != 1 || commits != 3 {
		t.Errorf("%d groups of %d commits, want 1 of 3", groups, commits)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_old'`); n != 0 {
		t.Errorf("%d aged records left, want 0", n)
	}
	if got := ownerCounts(t, dsn); got != "b=1,c=1" {
		t.Errorf("terminal counts %s, want b=1,c=1", got)
	}
}
