package pgstore_test

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// versionTrigger is the schema version whose migration makes every
// UPDATE of a task row bump its version.
const versionTrigger = 6

// A database of the version before moves forward: its rows are kept, and
// an UPDATE made outside the Store then bumps a row's version, so the
// Store that wrote the record reads the change instead of writing over it.
func TestMigrationBumpsVersion(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, versionTrigger-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', now())`)
	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if old, err := s.Get(t.Context(), "task_old"); err != nil || old.Status != bgtype.StatusRunning {
		t.Fatalf("old record = %+v, %v; want running", old, err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET description = 'by hand' WHERE id = 'task_old'`)
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_old' AND version = 2`); n != 1 {
		t.Fatalf("%d rows of version 2 after an UPDATE by hand, want 1", n)
	}
}

// A Store that wrote a record does not write over a change made to its
// row outside the Store: its next commit reads the row and applies the
// actions to what it holds (a completion loses to the cancel made by
// hand).
func TestCommitSeesOutsideChange(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	ctx := t.Context()
	m := rec("task_a", "alice", bgtype.StatusRunning)
	if err := s.Commit(ctx, "alice", store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET status = 'cancelled', finished_at = now(), terminal_at = now() WHERE id = 'task_a'`)
	done := m
	done.Status, done.FinishedAt, done.Result = bgtype.StatusCompleted, m.StartedAt.Add(1e9), []byte(`"ok"`)
	if err := s.Commit(ctx, "alice", store.UpsertAction(done)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "task_a")
	if err != nil || got.Status != bgtype.StatusCanceled || got.Result != nil {
		t.Fatalf("Get = %+v, %v; want cancelled (by hand), no result", got, err)
	}
	if n := pgstore.CachedCommits(s); n != 0 {
		t.Errorf("%d commits written without a read, want 0", n)
	}
}
