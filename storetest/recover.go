package storetest

import (
	"testing"

	"github.com/bgtask/bgtask"
)

// testRecover: Recover ends exactly the queued, running and awaiting_input
// records that gone runtime instances left, of every owner, each as
// bgtask.Interrupted makes it (not announced); a terminal record and a
// live record this Store wrote itself stay as they were; a second Recover
// finds nothing.
func testRecover(t *testing.T, c Config) {
	if c.Stale == nil {
		t.Skip("storetest: Config.Stale is nil, recovery not checked")
	}
	s := c.New(t)
	r, ok := s.(bgtask.Recoverer)
	if !ok {
		t.Skip("storetest: the store is not a bgtask.Recoverer, recovery not checked")
	}
	const a, b = "owner-a", "owner-b"
	stale := func(m bgtask.TaskMeta, instance string, attempt int64) bgtask.TaskMeta {
		m.Instance, m.Attempt, m.Name = instance, attempt, m.ID+" name"
		if m.Status != bgtask.StatusQueued {
			m.StartedAt = m.CreatedAt
		}
		return m
	}
	queued := stale(rec("task_rq", a, bgtask.StatusQueued, 1), "inst-gone-1", 0)
	running := stale(rec("task_rr", a, bgtask.StatusRunning, 2), "inst-gone-1", 2)
	awaiting := stale(rec("task_ra", b, bgtask.StatusAwaitingInput, 3), "inst-gone-2", 1)
	awaiting.Input = &bgtask.InputRequest{ID: "in_1", Prompt: "which branch?"}
	other := stale(rec("task_rb", b, bgtask.StatusRunning, 4), "inst-gone-2", 0)
	done := ended(stale(rec("task_rd", a, bgtask.StatusRunning, 5), "inst-gone-1", 1), bgtask.StatusCompleted, 6)
	done.Result = []byte(`{"ok":true}`)
	live := stale(rec("task_rl", a, bgtask.StatusRunning, 7), "inst-live", 0)

	c.Stale(t, s, queued, running, awaiting, other, done)
	commit(t, s, a, bgtask.Upsert(live))

	n, err := r.Recover(t.Context())
	if err != nil || n != 4 {
		t.Fatalf("Recover = %d, %v; want 4, nil", n, err)
	}
	for _, m := range []bgtask.TaskMeta{queued, running, awaiting, other} {
		got := get(t, s, m.ID)
		if got.FinishedAt.IsZero() {
			t.Errorf("Get(%s) after Recover: FinishedAt is zero", m.ID)
		}
		if d := diffMeta(bgtask.Interrupted(m, got.FinishedAt), got); d != "" {
			t.Errorf("Get(%s) after Recover differs from bgtask.Interrupted:\n%s", m.ID, d)
		}
	}
	for _, m := range []bgtask.TaskMeta{done, live} {
		if d := diffMeta(m, get(t, s, m.ID)); d != "" {
			t.Errorf("Get(%s) after Recover changed:\n%s", m.ID, d)
		}
	}
	if n, err := r.Recover(t.Context()); err != nil || n != 0 {
		t.Errorf("second Recover = %d, %v; want 0, nil", n, err)
	}
}
