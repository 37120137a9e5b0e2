package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// terminalCounts is the version whose migration counts each owner's
// terminal rows.
const terminalCounts = 7

// countsMatch fails t unless every owner's count of terminal rows in
// bgtask_owner_terminal is what the tasks table holds.
func countsMatch(t *testing.T, dsn string) {
	t.Helper()
	if n := sqlExec(t, dsn, `SELECT 1 FROM (SELECT owner, count(*) AS n FROM bgtask_tasks WHERE terminal_at IS NOT NULL GROUP BY owner) AS t
		FULL JOIN (SELECT owner, n FROM bgtask_owner_terminal WHERE n <> 0) AS c USING (owner)
		WHERE t.n IS DISTINCT FROM c.n`); n != 0 {
		t.Errorf("%d owners' terminal counts differ from their rows", n)
	}
}

// A database of the version before moves forward with its terminal rows
// counted, and retention then keeps each owner's limit.
func TestMigrationCountsTerminal(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, terminalCounts-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, terminal_at)
		SELECT 'task_old_' || i, 'alice', 'completed', now(), now() - make_interval(secs => 100 - i) FROM generate_series(1, 3) AS i
		UNION ALL SELECT 'task_bob', 'bob', 'failed', now(), now()
		UNION ALL SELECT 'task_live', 'alice', 'running', now(), NULL`)
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithRetainPerOwner(3))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_owner_terminal WHERE (owner, n) IN (('alice', 3), ('bob', 1))`); n != 2 {
		t.Fatalf("%d of alice's and bob's counts right after the migration, want 2", n)
	}
	m := rec("task_live", "alice", bgtype.StatusRunning)
	m.Status, m.FinishedAt = bgtype.StatusCompleted, m.StartedAt.Add(1e9)
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_old_1'`); n != 0 {
		t.Errorf("the oldest of alice's records is kept, want it gone (limit 3)")
	}
	countsMatch(t, dsn)
}

// The counts follow every write: terminal inserts and updates, removes,
// retention, a ReplaceAll, and changes made outside the Store.
func TestTerminalCountsFollowWrites(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithRetainPerOwner(2))
	ctx := t.Context()
	for i := range 5 {
		for _, o := range []string{"alice", "bob"} {
			m := rec(fmt.Sprintf("task_%s_%d", o, i), o, bgtype.StatusRunning)
			if err := s.Commit(ctx, o, store.UpsertAction(m)); err != nil {
				t.Fatal(err)
			}
			m.Status, m.FinishedAt = bgtype.StatusCompleted, m.StartedAt.Add(1e9)
			if err := s.Commit(ctx, o, store.UpsertAction(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	countsMatch(t, dsn)
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE terminal_at IS NOT NULL`); n != 4 {
		t.Errorf("%d terminal rows kept, want 4 (2 per owner)", n)
	}
	if err := s.Commit(ctx, "alice", store.RemoveAction("task_alice_4")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "bob", store.UpsertAction(rec("task_bob_done", "bob", bgtype.StatusFailed))); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `DELETE FROM bgtask_tasks WHERE id = 'task_bob_4'`)
	countsMatch(t, dsn)
	if err := s.Commit(ctx, "alice", store.ReplaceAllAction(rec("task_alice_new", "alice", bgtype.StatusCanceled))); err != nil {
		t.Fatal(err)
	}
	countsMatch(t, dsn)
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_owner_terminal WHERE (owner, n) IN (('alice', 1), ('bob', 1))`); n != 2 {
		t.Errorf("%d of alice's and bob's counts as expected (1 and 1), want 2", n)
	}
}
