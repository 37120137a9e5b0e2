package storetest

import (
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// testRetention: with perOwner=2, completing 5 tasks of an owner keeps the
// 2 that became terminal last, keeps every live task however many, and
// does not count another owner's records.
func testRetention(t *testing.T, c Config) {
	if c.NewRetaining == nil {
		t.Skip("storetest: Config.NewRetaining is nil, retention not checked")
	}
	s := c.NewRetaining(t, 2)
	const a, b = "owner-a", "owner-b"
	for i := range 3 {
		commit(t, s, a, store.UpsertAction(rec(fmt.Sprintf("task_live_%d", i), a, bgtype.StatusRunning, i)))
	}
	commit(t, s, a, store.UpsertAction(rec("task_queued", a, bgtype.StatusQueued, 3)))
	bDone := func(id string, n int) {
		commit(t, s, b, store.UpsertAction(ended(rec(id, b, bgtype.StatusRunning, n), bgtype.StatusCompleted, 20+n)))
	}
	bDone("task_b_0", 0)
	for i := range 5 {
		id := fmt.Sprintf("task_done_%d", i)
		m := rec(id, a, bgtype.StatusRunning, 10+i)
		commit(t, s, a, store.UpsertAction(m))
		statuses := []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted, bgtype.StatusCompleted}
		commit(t, s, a, store.UpsertAction(ended(m, statuses[i], 30+i)))
		if i == 1 {
			bDone("task_b_1", 1)
		}
	}
	wantIDs(t, "Load(owner-a) ids", snapIDs(load(t, s, a)),
		[]string{"task_done_3", "task_done_4", "task_live_0", "task_live_1", "task_live_2", "task_queued"})
	wantIDs(t, "Load(owner-b) ids", snapIDs(load(t, s, b)), []string{"task_b_0", "task_b_1"})
	for i := range 3 {
		id := fmt.Sprintf("task_done_%d", i)
		_, err := s.Get(t.Context(), id)
		wantErr(t, "Get("+id+") after retention", err, bgtask.ErrNotFound)
	}
	ms := list(t, "List(owner-a, terminal)", s.List(t.Context(), a,
		bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted))
	wantIDs(t, "List(owner-a, terminal)", idsOf(ms), []string{"task_done_3", "task_done_4"})

	// A live task that ends later is retained as the newest terminal one.
	commit(t, s, a, store.UpsertAction(ended(rec("task_live_0", a, bgtype.StatusRunning, 0), bgtype.StatusCompleted, 40)))
	wantIDs(t, "Load(owner-a) ids after task_live_0 ends", snapIDs(load(t, s, a)),
		[]string{"task_done_4", "task_live_0", "task_live_1", "task_live_2", "task_queued"})
}
