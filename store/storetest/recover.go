package storetest

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testRecover: Recover ends exactly the queued, running and awaiting_input
// records that gone runtime instances left, of every owner, each as
// store.Interrupted makes it (not announced); a terminal record and a
// live record this Store wrote itself stay as they were; a second Recover
// finds nothing.
func testRecover(t *testing.T, c Config) {
	if c.Stale == nil {
		t.Skip("storetest: Config.Stale is nil, recovery not checked")
	}
	s := c.New(t)
	r, ok := s.(store.OrphanInterrupter)
	if !ok {
		t.Skip("storetest: the store is not a store.OrphanInterrupter, recovery not checked")
	}
	const a, b = "owner-a", "owner-b"
	stale := func(m bgtype.TaskMeta, instance string, attempt int64) bgtype.TaskMeta {
		m.Instance, m.Attempt, m.Name = instance, attempt, m.ID+" name"
		if m.Status != bgtype.StatusQueued {
			m.StartedAt = m.CreatedAt
		}
		return m
	}
	queued := stale(rec("task_rq", a, bgtype.StatusQueued, 1), "inst-gone-1", 0)
	running := stale(rec("task_rr", a, bgtype.StatusRunning, 2), "inst-gone-1", 2)
	awaiting := stale(rec("task_ra", b, bgtype.StatusAwaitingInput, 3), "inst-gone-2", 1)
	awaiting.Input = &bgtype.InputRequest{ID: "in_1", Prompt: "which branch?"}
	other := stale(rec("task_rb", b, bgtype.StatusRunning, 4), "inst-gone-2", 0)
	done := ended(stale(rec("task_rd", a, bgtype.StatusRunning, 5), "inst-gone-1", 1), bgtype.StatusCompleted, 6)
	done.Result = []byte(`{"ok":true}`)
	live := stale(rec("task_rl", a, bgtype.StatusRunning, 7), "inst-live", 0)

	c.Stale(t, s, queued, running, awaiting, other, done)
	commit(t, s, a, store.UpsertAction(live))

	n, err := r.InterruptOrphaned(t.Context())
	if err != nil || n != 4 {
		t.Fatalf("Recover = %d, %v; want 4, nil", n, err)
	}
	for _, m := range []bgtype.TaskMeta{queued, running, awaiting, other} {
		got := get(t, s, m.ID)
		if got.FinishedAt.IsZero() {
			t.Errorf("Get(%s) after Recover: FinishedAt is zero", m.ID)
		}
		if d := diffMeta(store.Interrupted(m, got.FinishedAt), got); d != "" {
			t.Errorf("Get(%s) after Recover differs from store.Interrupted:\n%s", m.ID, d)
		}
	}
	for _, m := range []bgtype.TaskMeta{done, live} {
		if d := diffMeta(m, get(t, s, m.ID)); d != "" {
			t.Errorf("Get(%s) after Recover changed:\n%s", m.ID, d)
		}
	}
	if n, err := r.InterruptOrphaned(t.Context()); err != nil || n != 0 {
		t.Errorf("second Recover = %d, %v; want 0, nil", n, err)
	}
}
