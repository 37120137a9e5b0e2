package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// A transaction locks its counts first only when its statements would
// take them out of order: never for one statement, nor for owners that
// ascend across statements or were held already.
func TestPrelockOwners(t *testing.T) {
	for _, c := range []struct {
		name  string
		held  []string
		stmts [][]string
		want  []string
	}{
		{"no statement", nil, [][]string{nil, nil, nil}, nil},
		{"one statement", nil, [][]string{nil, {"b", "a", "c"}, nil}, nil},
		{"ascending", nil, [][]string{{"a"}, {"b", "c"}, {"d"}}, nil},
		{"equal owners", nil, [][]string{{"a", "b"}, {"b", "a"}}, nil},
		{"later owner held", nil, [][]string{{"a", "c"}, {"a", "d"}}, nil},
		{"insert b, update a", nil, [][]string{{"b"}, {"a"}}, []string{"a", "b"}},
		{"update b, insert a", nil, [][]string{{"b"}, {"a"}, nil}, []string{"a", "b"}},
		{"one below", nil, [][]string{{"a", "c"}, {"b", "d", "a"}}, []string{"a", "b", "c", "d"}},
		{"delete below", nil, [][]string{{"b"}, nil, {"a", "a"}}, []string{"a", "b"}},
		{"byte order", nil, [][]string{{"a"}, {"B"}}, []string{"B", "a"}},
		{"after held, ascending", []string{"a", "c"}, [][]string{{"d"}, {"c", "e"}}, nil},
		{"after held, one statement", []string{"a"}, [][]string{{"b"}}, nil},
		{"after held, out of order", []string{"a"}, [][]string{{"c"}, {"a", "b"}}, []string{"b", "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pgstore.PrelockOwners(c.held, c.stmts...); !slices.Equal(got, c.want) {
				t.Errorf("PrelockOwners(%q, %q) = %q, want %q", c.held, c.stmts, got, c.want)
			}
		})
	}
}

// Two Stores on one database each commit a group of three: the spawn and
// the end of a task of one owner (one insert of an ended record) and the
// end of an older task of the other owner (an update). Store A's group
// spawns for b and ends a's task, B's the other way round. Each statement
// locks its owners' terminal counts (decision 170), the second of each
// group waits at a gate the test holds (a row trigger on the records
// described "gate"), and then the first statements of both groups hold a
// count each. Before decision 797 the statement orders were, on the long
// way (the older tasks were written by the other Store, so neither is
// cached), A: insert b, update a; B: insert a, update b; on the cached
// way (each Store wrote its older task), A: update a, insert b; B: update
// b, insert a. Either way one transaction held b and waited for a, the
// other the reverse: a deadlock, which PostgreSQL broke after
// deadlock_timeout and the Store committed again. Now the long way locks
// both counts first where its statements would not ascend (A's), and the
// cached way is not taken where they would not (B's goes the long way,
// whose insert of a comes before its update of b).
func TestCommitTakesItsOwnCountsInOrder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cached       bool
		wantPrelocks map[string]int64
		wantCached   map[string]int64 // cached commits from the gate on: the group's, and the holder's
	}{
		{"long way", false, map[string]int64{"A": 1, "B": 0}, map[string]int64{"A": 1, "B": 1}},
		{"cached", true, map[string]int64{"A": 0, "B": 0}, map[string]int64{"A": 2, "B": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testOwnCountsInOrder(t, tc.cached, tc.wantPrelocks, tc.wantCached)
		})
	}
}

func testOwnCountsInOrder(t *testing.T, cached bool, wantPrelocks, wantCached map[string]int64) {
	// One transaction slot each, so that a held commit makes the next
	// three one group; no age limit (its passes lock counts too).
	a, dsn := openStoreDSN(t, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithLoneCommitsAlone())
	b := openMore(t, dsn, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	commit := upserter(ctx)
	stores := map[string]*pgstore.Store{"A": a, "B": b}
	other := map[string]string{"A": "B", "B": "A"}
	ended := map[string]string{"A": "a", "B": "b"}   // the owner of the older task each group ends
	spawned := map[string]string{"A": "b", "B": "a"} // the owner of the task each group spawns and ends
	for name, s := range stores {
		if err := commit(s, rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning)); err != nil {
			t.Fatal(err)
		}
		writer := s // the cached way: the Store that ends the task wrote it
		if !cached {
			writer = stores[other[name]]
		}
		if err := commit(writer, rec("task_"+name+"_old", ended[name], bgtype.StatusRunning)); err != nil {
			t.Fatal(err)
		}
	}
	// The gate: a row written with the description "gate" waits for the
	// test's advisory lock 797.
	sqlExec(t, dsn, `CREATE FUNCTION test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(797); RETURN NEW; END $$;
		CREATE TRIGGER test_gate BEFORE INSERT OR UPDATE ON bgtask_tasks
			FOR EACH ROW WHEN (NEW.description = 'gate') EXECUTE FUNCTION test_gate()`)
	gate, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Rollback(context.Background()) })
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_xact_lock(797)`); err != nil {
		t.Fatal(err)
	}
	// Each Store's one slot waits for a holder row the test locks, so
	// that the group's three commits queue behind it.
	hold, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE owner LIKE 'holder_%' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var holders, groups background
	spawn := func(bg *background, s *pgstore.Store, m bgtype.TaskMeta) {
		bg.run(m.ID, func() error { return commit(s, m) })
	}
	for name, s := range stores {
		m := rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning)
		m.Description = "held"
		spawn(&holders, s, m)
	}
	waitFor(t, "both Stores' slots wait for the held rows", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 2
	})
	cached0, prelocks0, deadlocks0 := map[string]int64{}, map[string]int64{}, pgstore.Deadlocks(a)+pgstore.Deadlocks(b)
	for name, s := range stores {
		cached0[name], prelocks0[name] = pgstore.CachedCommits(s), pgstore.Prelocks(s)
		// The group's second statement is the gated one: on the long way
		// the update of the older task, on the cached way the insert.
		fresh := rec("task_"+name+"_new", spawned[name], bgtype.StatusRunning)
		end := rec("task_"+name+"_new", spawned[name], bgtype.StatusCompleted)
		old := rec("task_"+name+"_old", ended[name], bgtype.StatusCompleted)
		if cached {
			end.Description = "gate"
		} else {
			old.Description = "gate"
		}
		for i, m := range []bgtype.TaskMeta{fresh, end, old} {
			spawn(&groups, s, m)
			waitFor(t, fmt.Sprintf("%s queues %d commits", name, i+1), func() bool { return pgstore.QueuedCommits(s) == i+1 })
		}
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	holders.wait(t)
	// Both groups' transactions are now under way: each waits, at the
	// gate or for a count the other holds.
	waitFor(t, "both Stores' groups wait", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 2
	})
	if err := gate.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	groups.wait(t)
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b) - deadlocks0; n != 0 {
		t.Errorf("%d deadlocks, want 0", n)
	}
	for name, s := range stores {
		if n := pgstore.Prelocks(s) - prelocks0[name]; n != wantPrelocks[name] {
			t.Errorf("%s: %d transactions locked their counts first, want %d", name, n, wantPrelocks[name])
		}
		if n := pgstore.CachedCommits(s) - cached0[name]; n != wantCached[name] {
			t.Errorf("%s: %d cached commits, want %d", name, n, wantCached[name])
		}
		if g, n := pgstore.Groups(s); g != 1 || n != 3 {
			t.Errorf("%s: %d groups of %d commits, want 1 of 3", name, g, n)
		}
	}
	var got string
	sqlScan(t, dsn, `SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM bgtask_tasks`, &got)
	if want := "task_A_hold=running,task_A_new=completed,task_A_old=completed,task_B_hold=running,task_B_new=completed,task_B_old=completed"; got != want {
		t.Errorf("records %s, want %s", got, want)
	}
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner) FROM bgtask_owner_terminal WHERE n <> 0`, &got)
	if got != "a=2,b=2" {
		t.Errorf("terminal counts %s, want a=2,b=2", got)
	}
}

// The common group locks no count first and keeps the cached way: it
// spawns a task of d, ends tasks of c and a (one update, owners in any
// order) and spawns and ends a task of z (an insert of an ended record,
// after the update: z sorts after a and c).
func TestCommonGroupLocksNoCountsFirst(t *testing.T) {
	t.Parallel()
	s, dsn := openStoreDSN(t, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	commit := func(m bgtype.TaskMeta) error { return s.Commit(ctx, m.Owner, store.UpsertAction(m)) }
	for _, m := range []bgtype.TaskMeta{
		rec("task_hold", "holder", bgtype.StatusRunning),
		rec("task_c", "c", bgtype.StatusRunning),
		rec("task_a", "a", bgtype.StatusRunning),
	} {
		if err := commit(m); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_hold' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var bg background
	spawn := func(m bgtype.TaskMeta) { bg.run(m.ID, func() error { return commit(m) }) }
	held := rec("task_hold", "holder", bgtype.StatusRunning)
	held.Description = "held"
	spawn(held)
	waitFor(t, "the slot waits for the held row", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	cached0, prelocks0 := pgstore.CachedCommits(s), pgstore.Prelocks(s)
	for i, m := range []bgtype.TaskMeta{
		rec("task_d", "d", bgtype.StatusRunning),
		rec("task_c", "c", bgtype.StatusCompleted),
		rec("task_a", "a", bgtype.StatusCompleted),
		rec("task_z", "z", bgtype.StatusRunning),
		rec("task_z", "z", bgtype.StatusCompleted),
	} {
		spawn(m)
		waitFor(t, fmt.Sprintf("%d commits queue", i+1), func() bool { return pgstore.QueuedCommits(s) == i+1 })
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	bg.wait(t)
	if n := pgstore.Prelocks(s) - prelocks0; n != 0 {
		t.Errorf("%d transactions locked their counts first, want 0", n)
	}
	if n := pgstore.CachedCommits(s) - cached0; n != 2 {
		t.Errorf("%d cached commits, want 2 (the holder's and the group's)", n)
	}
	if g, n := pgstore.Groups(s); g != 1 || n != 5 {
		t.Errorf("%d groups of %d commits, want 1 of 5", g, n)
	}
	var got string
	sqlScan(t, dsn, `SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM bgtask_tasks`, &got)
	if want := "task_a=completed,task_c=completed,task_d=running,task_hold=running,task_z=completed"; got != want {
		t.Errorf("records %s, want %s", got, want)
	}
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner) FROM bgtask_owner_terminal WHERE n <> 0`, &got)
	if got != "a=1,c=1,z=1" {
		t.Errorf("terminal counts %s, want a=1,c=1,z=1", got)
	}
}

// Late arrivals join an open group only if their own statements, after
// the counts the group holds, take counts in order: the group ended a's
// task (it holds a); the late commits end c's task (an update of c) and
// write an ended record of b (an insert, after the update: b sorts before
// c). They wait for the next transaction, which takes the long way (the
// insert of b, then the update of c) and locks no count first.
func TestLateArrivalsTakeTheirOwnCountsInOrder(t *testing.T) {
	t.Parallel()
	s, dsn := openStoreDSN(t, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	commit := func(m bgtype.TaskMeta) error { return s.Commit(ctx, m.Owner, store.UpsertAction(m)) }
	for _, m := range []bgtype.TaskMeta{
		rec("task_hold", "holder", bgtype.StatusRunning),
		rec("task_a", "a", bgtype.StatusRunning),
		rec("task_c", "c", bgtype.StatusRunning),
	} {
		if err := commit(m); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(context.Background()) })
	if _, err := hold.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_hold' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var bg background
	spawn := func(m bgtype.TaskMeta) { bg.run(m.ID, func() error { return commit(m) }) }
	held := rec("task_hold", "holder", bgtype.StatusRunning)
	held.Description = "held"
	spawn(held)
	waitFor(t, "the slot waits for the held row", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	// The group: the end of a's task and a spawn of d.
	for i, m := range []bgtype.TaskMeta{rec("task_a", "a", bgtype.StatusCompleted), rec("task_d", "d", bgtype.StatusRunning)} {
		spawn(m)
		waitFor(t, fmt.Sprintf("%d commits queue", i+1), func() bool { return pgstore.QueuedCommits(s) == i+1 })
	}
	var once sync.Once
	pgstore.SetAfterOpen(s, func() {
		once.Do(func() {
			spawn(rec("task_c", "c", bgtype.StatusCompleted))
			waitQueued(t, s, 1)
			spawn(rec("task_b", "b", bgtype.StatusCompleted))
			waitQueued(t, s, 2)
		})
	})
	t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
	prelocks0 := pgstore.Prelocks(s)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	bg.wait(t)
	if n := pgstore.LateCommits(s); n != 0 {
		t.Errorf("%d late commits joined, want 0", n)
	}
	if n := pgstore.Prelocks(s) - prelocks0; n != 0 {
		t.Errorf("%d transactions locked their counts first, want 0", n)
	}
	if g, n := pgstore.Groups(s); g != 2 || n != 4 {
		t.Errorf("%d groups of %d commits, want 2 of 4", g, n)
	}
	var got string
	sqlScan(t, dsn, `SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM bgtask_tasks`, &got)
	if want := "task_a=completed,task_b=completed,task_c=completed,task_d=running,task_hold=running"; got != want {
		t.Errorf("records %s, want %s", got, want)
	}
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner) FROM bgtask_owner_terminal WHERE n <> 0`, &got)
	if got != "a=1,b=1,c=1" {
		t.Errorf("terminal counts %s, want a=1,b=1,c=1", got)
	}
}
