package sqlitestore_test

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/store/storetest"
)

// A Commit of several upserts reads their rows in one query: a new id is
// inserted, an own row is updated, an id of another owner is left alone
// even when that row is corrupt (it is never decoded for this owner), and
// an own corrupt row fails the whole Commit, naming it.
func TestCommitOfSeveralRecords(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusRunning)))
	commit(t, s, "b", store.UpsertAction(rec("b", 1, bgtype.StatusRunning)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, path, rec("b", 1, "").ID, storetest.CorruptStatus)
	corrupt(t, path, rec("a", 2, "").ID, storetest.CorruptStatus)
	s = openAt(t, path, sqlitestore.WithoutRecovery())

	stolen := rec("b", 1, bgtype.StatusCompleted)
	stolen.Owner = "a"
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)), store.UpsertAction(stolen), store.UpsertAction(rec("a", 3, bgtype.StatusQueued)))
	if got := get(t, s, rec("a", 1, "").ID); got.Status != bgtype.StatusCompleted {
		t.Fatalf("own record: %s, want completed", got.Status)
	}
	if got := get(t, s, rec("a", 3, "").ID); got.Status != bgtype.StatusQueued {
		t.Fatalf("new record: %s, want queued", got.Status)
	}
	var status string
	if err := rawDB(t, path).QueryRowContext(t.Context(), "SELECT status || ' ' || owner FROM tasks WHERE id = ?", stolen.ID).Scan(&status); err != nil || status != "paused b" {
		t.Fatalf("another owner's row: %q, %v; want it untouched (paused b)", status, err)
	}

	err := s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 4, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusCompleted)))
	wantErr(t, "Commit over an own corrupt row", err,
		`sqlitestore: task task_a_02: bgtask: corrupt task metadata: unknown status "paused"`, bgtype.ErrCorrupt)
	wantIDs(t, "List(a, queued, running)", ids(t, s, "a", bgtype.StatusQueued, bgtype.StatusRunning), idsOf("a", 3))
}
