package sqlitestore_test

import (
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/storetest"
)

// A Commit of several upserts reads their rows in one query: a new id is
// inserted, an own row is updated, an id of another owner is left alone
// even when that row is corrupt (it is never decoded for this owner), and
// an own corrupt row fails the whole Commit, naming it.
func TestCommitOfSeveralRecords(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	commit(t, s, "a", bgtask.Upsert(rec("a", 1, bgtask.StatusRunning)), bgtask.Upsert(rec("a", 2, bgtask.StatusRunning)))
	commit(t, s, "b", bgtask.Upsert(rec("b", 1, bgtask.StatusRunning)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, path, rec("b", 1, "").ID, storetest.CorruptStatus)
	corrupt(t, path, rec("a", 2, "").ID, storetest.CorruptStatus)
	s = openAt(t, path, sqlitestore.WithoutRecovery())

	stolen := rec("b", 1, bgtask.StatusCompleted)
	stolen.Owner = "a"
	commit(t, s, "a", bgtask.Upsert(rec("a", 1, bgtask.StatusCompleted)), bgtask.Upsert(stolen), bgtask.Upsert(rec("a", 3, bgtask.StatusQueued)))
	if got := get(t, s, rec("a", 1, "").ID); got.Status != bgtask.StatusCompleted {
		t.Fatalf("own record: %s, want completed", got.Status)
	}
	if got := get(t, s, rec("a", 3, "").ID); got.Status != bgtask.StatusQueued {
		t.Fatalf("new record: %s, want queued", got.Status)
	}
	var status string
	if err := rawDB(t, path).QueryRowContext(t.Context(), "SELECT status || ' ' || owner FROM tasks WHERE id = ?", stolen.ID).Scan(&status); err != nil || status != "paused b" {
		t.Fatalf("another owner's row: %q, %v; want it untouched (paused b)", status, err)
	}

	err := s.Commit(t.Context(), "a", bgtask.Upsert(rec("a", 4, bgtask.StatusRunning)), bgtask.Upsert(rec("a", 2, bgtask.StatusCompleted)))
	wantErr(t, "Commit over an own corrupt row", err,
		`sqlitestore: task task_a_02: bgtask: corrupt task metadata: unknown status "paused"`, bgtask.ErrCorrupt)
	wantIDs(t, "List(a, queued, running)", ids(t, s, "a", bgtask.StatusQueued, bgtask.StatusRunning), idsOf("a", 3))
}
