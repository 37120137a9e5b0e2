package sqlitestore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// clock is a settable clock for the store's age retention.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Terminal records go once they were committed terminal longer ago than
// WithRetainFor, by the store's clock, checked by commits that end tasks;
// live records stay however old.
func TestRetainFor(t *testing.T) {
	t.Parallel()
	c := &clock{now: base}
	s, _ := open(t, sqlitestore.WithRetainFor(time.Hour), sqlitestore.WithClock(c.Now))
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusCompleted)))
	c.Advance(30 * time.Minute)
	commit(t, s, "b", store.UpsertAction(rec("b", 3, bgtype.StatusFailed)))
	c.Advance(45 * time.Minute) // task_a_02 ended 75 minutes ago, task_b_03 45
	commit(t, s, "a", store.UpsertAction(rec("a", 4, bgtype.StatusRunning)))
	wantIDs(t, "List(a) after a commit that ends nothing", ids(t, s, "a"), idsOf("a", 1, 2, 4))
	commit(t, s, "a", store.UpsertAction(rec("a", 4, bgtype.StatusCanceled)))
	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 1, 4))
	wantIDs(t, "List(b)", ids(t, s, "b"), idsOf("b", 3))
	c.Advance(time.Hour) // task_a_04 ended exactly an hour ago: kept
	commit(t, s, "c", store.UpsertAction(rec("c", 5, bgtype.StatusCompleted)))
	wantIDs(t, "List(a) an hour later", ids(t, s, "a"), idsOf("a", 1, 4))
	c.Advance(time.Microsecond)
	commit(t, s, "c", store.UpsertAction(rec("c", 6, bgtype.StatusCompleted)))
	wantIDs(t, "List(a) later", ids(t, s, "a"), idsOf("a", 1))
	wantIDs(t, "List(b) later", ids(t, s, "b"), nil)
}

// The count limit holds across a restart: the order in which records
// became terminal is stored.
func TestRetainPerOwnerAcrossReopen(t *testing.T) {
	t.Parallel()
	s, path := open(t, sqlitestore.WithRetainPerOwner(2))
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusRunning)))
	commit(t, s, "a", store.UpsertAction(rec("a", 2, bgtype.StatusCompleted)))
	commit(t, s, "a", store.UpsertAction(rec("a", 3, bgtype.StatusFailed)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, sqlitestore.WithRetainPerOwner(2))
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)))
	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 1, 3))

	none := openAt(t, ":memory:", sqlitestore.WithRetainPerOwner(0))
	commit(t, none, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 2, bgtype.StatusCompleted)))
	wantIDs(t, "List(a) keeping none", ids(t, none, "a"), idsOf("a", 1))
}

// Records removed or replaced away are no longer counted: the limit keeps
// exactly WithRetainPerOwner terminal records.
func TestRetainPerOwnerCountsRemovals(t *testing.T) {
	t.Parallel()
	s, _ := open(t, sqlitestore.WithRetainPerOwner(3))
	for n := 1; n <= 3; n++ {
		commit(t, s, "a", store.UpsertAction(rec("a", n, bgtype.StatusCompleted)))
	}
	commit(t, s, "a", store.RemoveAction(rec("a", 1, "").ID))
	commit(t, s, "a", store.UpsertAction(rec("a", 4, bgtype.StatusCompleted)))
	wantIDs(t, "List(a) after Remove", ids(t, s, "a"), idsOf("a", 2, 3, 4))
	commit(t, s, "a", store.ReplaceAllAction(rec("a", 3, bgtype.StatusCompleted), rec("a", 4, bgtype.StatusCompleted), rec("a", 5, bgtype.StatusRunning)))
	commit(t, s, "a", store.UpsertAction(rec("a", 6, bgtype.StatusFailed)))
	wantIDs(t, "List(a) after ReplaceAll", ids(t, s, "a"), idsOf("a", 3, 4, 5, 6))
	commit(t, s, "a", store.UpsertAction(rec("a", 5, bgtype.StatusFailed)))
	wantIDs(t, "List(a) at the limit", ids(t, s, "a"), idsOf("a", 4, 5, 6))
}

// Over a larger limit, the count stays exact after every completion: the
// oldest terminal record goes as each new one ends; live records are not
// counted.
func TestRetainPerOwnerExactAtLargeLimits(t *testing.T) {
	t.Parallel()
	s, _ := open(t, sqlitestore.WithRetainPerOwner(32))
	commit(t, s, "a", store.UpsertAction(rec("a", 0, bgtype.StatusRunning)))
	for n := 1; n <= 32; n++ { // at the limit
		commit(t, s, "a", store.UpsertAction(rec("a", n, bgtype.StatusCompleted)))
	}
	for end := 33; end <= 40; end++ {
		commit(t, s, "a", store.UpsertAction(rec("a", end, bgtype.StatusCompleted)))
		want := []int{0} // the live one
		for n := end - 31; n <= end; n++ {
			want = append(want, n)
		}
		wantIDs(t, fmt.Sprintf("List(a) after task %d ends", end), ids(t, s, "a"), idsOf("a", want...))
	}
}
