package sqlitestore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// PendingOwners names the given owners that hold a record that is not
// terminal or not announced, each once, and nothing else.
func TestPendingOwners(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	commit(t, s, "queued", bgtask.Upsert(rec("queued", 1, bgtask.StatusQueued)))
	commit(t, s, "mixed", bgtask.Upsert(rec("mixed", 1, bgtask.StatusCompleted)), bgtask.Upsert(rec("mixed", 2, bgtask.StatusAwaitingInput)),
		bgtask.Upsert(rec("mixed", 3, bgtask.StatusRunning)))
	commit(t, s, "ended", bgtask.Upsert(rec("ended", 1, bgtask.StatusFailed)), bgtask.Upsert(rec("ended", 2, bgtask.StatusInterrupted)))
	commit(t, s, "ended", bgtask.Announce(rec("ended", 1, "").ID, rec("ended", 2, "").ID))
	commit(t, s, "untold", bgtask.Upsert(rec("untold", 1, bgtask.StatusCompleted)))
	commit(t, s, "other", bgtask.Upsert(rec("other", 1, bgtask.StatusRunning)))

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
