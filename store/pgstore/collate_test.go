package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// byteOrderCounts is the version whose migration makes the counting
// triggers take the owners' counts in byte order (COLLATE "C").
const byteOrderCounts = 15

// icuDSN returns the DSN of a fresh schema in a database whose default
// collation is ICU's en-US, under which "a" sorts before "B" (in bytes
// "B" sorts first), as in most real databases; the test server's own
// databases sort in bytes (initdb --locale=C). A server built without ICU
// skips t, but fails it under CI, so a CI run never passes by skipping.
func icuDSN(t *testing.T) string {
	t.Helper()
	var icu bool
	sqlScan(t, pgtest.Current().DSN, `SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collprovider = 'i')`, &icu)
	if !icu {
		if os.Getenv("CI") == "true" {
			t.Fatal("the PostgreSQL server has no ICU collations: cannot make a database sorted in en-US")
		}
		t.Skip("the PostgreSQL server has no ICU collations: cannot make a database sorted in en-US")
	}
	dsn := pgtest.NewDatabaseDSN(t, `TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`)
	var aFirst bool
	sqlScan(t, dsn, `SELECT 'a' < 'B'`, &aFirst)
	if !aFirst {
		t.Fatal(`the en-US database sorts "B" before "a"`)
	}
	return dsn
}

// In a database sorted in en-US, two Stores each with a group's
// transaction open: B's ended a task of owner "B" (its count locked); A's
// group ends a task of "a" and one of "B" in one statement, whose trigger
// locks both counts; then B's late arrival ends a task of "a", which B
// admits since "a" sorts after "B" in bytes (lockorder.go). Before, the
// trigger took the counts in the database's order: A held "a" and waited
// for "B" while B waited for "a", a deadlock PostgreSQL broke by failing
// one transaction (40P01), committed again. In byte order A waits for
// "B" holding no count, and B's late arrival takes "a" and commits. The
// same holds in a database migrated from the version before.
func TestTriggersTakeOwnersInByteOrder(t *testing.T) {
	for _, from := range []int{0, byteOrderCounts - 1} {
		t.Run(fmt.Sprintf("from version %d", from), func(t *testing.T) {
			t.Parallel()
			dsn := icuDSN(t)
			if from > 0 {
				migrateTo(t, dsn, from)
			}
			triggersTakeOwnersInByteOrder(t, dsn)
		})
	}
}

func triggersTakeOwnersInByteOrder(t *testing.T, dsn string) {
	// One transaction slot each; no age limit, whose pass would lock
	// counts of its own.
	stores := map[string]*pgstore.Store{}
	for _, name := range []string{"A", "B"} {
		stores[name] = openMore(t, dsn, "pool_max_conns=1", pgstore.WithRetainFor(0), pgstore.WithLoneCommitsAlone())
	}
	a, b := stores["A"], stores["B"]
	ctx := t.Context()
	commit := upserter(ctx)
	for name, s := range stores {
		for _, m := range []bgtype.TaskMeta{
			rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning),
			rec("task_"+name+"_a", "a", bgtype.StatusRunning),
			rec("task_"+name+"_B", "B", bgtype.StatusRunning),
		} {
			if err := commit(s, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each Store's one slot waits for its holder row, which the test
	// locks, so that the group's two commits queue behind it; B's is let
	// go first.
	held := map[string]pgx.Tx{}
	for name := range stores {
		tx, err := sqlConn(t, dsn).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, `SELECT 1 FROM bgtask_tasks WHERE owner = $1 FOR UPDATE`, "holder_"+name); err != nil {
			t.Fatal(err)
		}
		held[name] = tx
	}
	var bg background
	spawn := func(s *pgstore.Store, m bgtype.TaskMeta) { bg.run(m.ID, func() error { return commit(s, m) }) }
	for name, s := range stores {
		m := rec("task_"+name+"_hold", "holder_"+name, bgtype.StatusRunning)
		m.Description = "held"
		spawn(s, m)
	}
	waitFor(t, "both Stores' slots wait for the held rows", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 2
	})
	// A's group ends a's and B's tasks; B's ends B's and spawns one of B.
	spawn(a, rec("task_A_a", "a", bgtype.StatusCompleted))
	spawn(a, rec("task_A_B", "B", bgtype.StatusCompleted))
	waitFor(t, "the group queues on A", func() bool { return pgstore.QueuedCommits(a) == 2 })
	spawn(b, rec("task_B_B", "B", bgtype.StatusCompleted))
	spawn(b, rec("task_B_new", "B", bgtype.StatusRunning))
	waitFor(t, "the group queues on B", func() bool { return pgstore.QueuedCommits(b) == 2 })
	var once sync.Once
	hooked := make(chan struct{})
	pgstore.SetAfterOpen(b, func() {
		once.Do(func() {
			// B holds B's count: its late arrival queues, then A's group
			// runs until its trigger waits for that count.
			spawn(b, rec("task_B_a", "a", bgtype.StatusCompleted))
			waitQueued(t, b, 1)
			if err := held["A"].Rollback(ctx); err != nil {
				t.Error(err)
			}
			// Not waitFor: its Fatal belongs to the test's goroutine.
			if err := waitUntil("A's trigger waits for B's count", func() bool {
				return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
			}); err != nil {
				t.Error(err)
			}
			close(hooked)
		})
	})
	t.Cleanup(func() { pgstore.SetAfterOpen(b, nil) })
	d0 := pgstore.Deadlocks(a) + pgstore.Deadlocks(b)
	if err := held["B"].Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hooked:
	case <-time.After(hangGuard):
		t.Fatal("B's group transaction never opened")
	}
	bg.wait(t)
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b) - d0; n != 0 {
		t.Errorf("%d deadlocks, want 0", n)
	}
	if n := pgstore.LateCommits(b); n != 1 {
		t.Errorf("B: %d late commits joined, want 1 (a sorts after B in bytes)", n)
	}
	var n int64
	sqlScan(t, dsn, `SELECT count(*) FROM bgtask_tasks WHERE status = 'completed'`, &n)
	if n != 4 {
		t.Errorf("%d completed records, want 4", n)
	}
	var counts string
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner COLLATE "C") FROM bgtask_owner_terminal WHERE n <> 0`, &counts)
	if counts != "B=2,a=2" {
		t.Errorf("terminal counts %s, want B=2,a=2", counts)
	}
	countsMatch(t, dsn)
}

// The age pass locks its owners' counts in byte order in a database
// sorted in en-US: lockAgedSQL returns (and locks) "B" before "a".
func TestAgedCountsLockInByteOrder(t *testing.T) {
	t.Parallel()
	dsn := icuDSN(t)
	openOn(t, dsn)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, terminal_at)
		SELECT 'task_' || o, o, 'completed', now(), now() - interval '1 hour' FROM unnest(ARRAY['a', 'B', 'c', 'D']) AS o`)
	ctx := guard(t)
	tx, err := sqlConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, pgstore.LockAgedSQL, int64(time.Minute/time.Microsecond), 10)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(owners, ","); got != "B,D,a,c" {
		t.Errorf("aged counts locked in the order %s, want B,D,a,c", got)
	}
}

// A database of the version before, in a schema other than public,
// moves its counting trigger to byte order, its counts kept exact.
func TestMigrationOrdersCountsInBytes(t *testing.T) {
	t.Parallel()
	dsn := icuDSN(t)
	migrateTo(t, dsn, byteOrderCounts-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, terminal_at)
		SELECT 'task_old_' || o, o, 'completed', now(), now() FROM unnest(ARRAY['a', 'B']) AS o
		UNION ALL SELECT 'task_live_' || o, o, 'running', now(), NULL FROM unnest(ARRAY['a', 'B']) AS o`)
	s := openOn(t, dsn)
	var def string
	sqlScan(t, dsn, `SELECT pg_get_functiondef(p.oid) FROM pg_proc p
		WHERE p.proname = 'bgtask_count_terminal' AND p.pronamespace = current_schema()::regnamespace`, &def)
	if n := strings.Count(def, `ORDER BY owner COLLATE "C"`); n != 3 {
		t.Errorf("the counting trigger orders by owner in bytes in %d statements, want 3:\n%s", n, def)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM pg_proc WHERE proname = 'bgtask_count_terminal'`); n != 1 {
		t.Errorf("%d functions bgtask_count_terminal in the database, want 1 (the schema's)", n)
	}
	var counts string
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner COLLATE "C") FROM bgtask_owner_terminal`, &counts)
	if counts != "B=1,a=1" {
		t.Errorf("terminal counts %s after the migration, want B=1,a=1", counts)
	}
	// An update, a commit and a delete, each of both owners' rows.
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET status = 'failed', terminal_at = now() WHERE id IN ('task_live_a', 'task_live_B')`)
	m := rec("task_new_a", "a", bgtype.StatusCompleted)
	if err := s.Commit(t.Context(), "a", store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `DELETE FROM bgtask_tasks WHERE id IN ('task_old_a', 'task_old_B')`)
	sqlScan(t, dsn, `SELECT string_agg(owner || '=' || n, ',' ORDER BY owner COLLATE "C") FROM bgtask_owner_terminal`, &counts)
	if counts != "B=1,a=2" {
		t.Errorf("terminal counts %s, want B=1,a=2", counts)
	}
	countsMatch(t, dsn)
}
