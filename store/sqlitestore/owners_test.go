package sqlitestore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// PendingOwners names the given owners that hold a record that is not
// terminal or not announced, each once, and nothing else.
func TestPendingOwners(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	commit(t, s, "queued", store.UpsertAction(rec("queued", 1, bgtype.StatusQueued)))
	commit(t, s, "mixed", store.UpsertAction(rec("mixed", 1, bgtype.StatusCompleted)), store.UpsertAction(rec("mixed", 2, bgtype.StatusAwaitingInput)),
		store.UpsertAction(rec("mixed", 3, bgtype.StatusRunning)))
	commit(t, s, "ended", store.UpsertAction(rec("ended", 1, bgtype.StatusFailed)), store.UpsertAction(rec("ended", 2, bgtype.StatusInterrupted)))
	commit(t, s, "ended", store.AnnounceAction(rec("ended", 1, "").ID, rec("ended", 2, "").ID))
	commit(t, s, "untold", store.UpsertAction(rec("untold", 1, bgtype.StatusCompleted)))
	commit(t, s, "other", store.UpsertAction(rec("other", 1, bgtype.StatusRunning)))

	got, err := s.PendingOwners(t.Context(), []string{"ended", "mixed", "none", "queued", "untold", "mixed"})
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"mixed", "queued", "untold"}) {
		t.Fatalf("PendingOwners = %q, %v; want [mixed queued untold]", got, err)
	}
	if got, err := s.PendingOwners(t.Context(), nil); err != nil || len(got) != 0 {
		t.Fatalf("PendingOwners(none) = %q, %v; want nothing", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PendingOwners(t.Context(), []string{"queued"}); !errors.Is(err, sqlitestore.ErrClosed) {
		t.Fatalf("PendingOwners after Close = %v, want ErrClosed", err)
	}
}
