package storetest

import (
	"encoding/json"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testResume: a resumable task's record (its Resume) round-trips; a
// requeue puts it back in the queue on a new attempt; of two instances
// that claim it, the first wins and the second changes nothing; a
// checkpoint of the superseded attempt is dropped; a store.KindQueue lists
// the waiting record, and not once it is claimed.
func testResume(t *testing.T, c Config) {
	s := c.New(t)
	m := rec("task_k", "alice", bgtype.StatusRunning, 1)
	m.StartedAt, m.Instance, m.Attempt = at(1), "inst-a", 1
	m.Resume = &bgtype.Resume{Kind: "crawl/v1", Spec: json.RawMessage(`{"url":"x"}`), MaxAttempts: 3,
		Checkpoint: json.RawMessage(`{"page":2}`), SavedAt: at(2), SavedBy: 1}
	commit(t, s, "alice", store.UpsertAction(m))
	if d := diffMeta(m, get(t, s, m.ID)); d != "" {
		t.Fatalf("resumable record read back differs:\n%s", d)
	}
	plain := rec("task_p", "alice", bgtype.StatusRunning, 2)
	commit(t, s, "alice", store.UpsertAction(plain))
	if got := get(t, s, plain.ID); got.Resume != nil {
		t.Fatalf("a closure's record read back with a Resume: %+v", got.Resume)
	}

	q := store.Requeued(m, at(3), "gone", false)
	commit(t, s, "alice", store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{q}, At: at(3)})
	if d := diffMeta(q, get(t, s, m.ID)); d != "" {
		t.Fatalf("requeued record differs:\n%s", d)
	}
	if kq, ok := s.(store.KindQueue); ok {
		waiting, err := kq.WaitingTasks(t.Context(), 10)
		if err != nil || len(waiting) != 1 || waiting[0].ID != m.ID {
			t.Fatalf("WaitingTasks = %v, %v; want %s", idsOf(waiting), err, m.ID)
		}
	}
	claim := func(inst string) store.Action {
		u := q
		u.Status, u.Instance = bgtype.StatusRunning, inst
		return store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{u}, At: at(4)}
	}
	commit(t, s, "alice", claim("inst-b"))
	commit(t, s, "alice", claim("inst-c")) // dropped, not an error
	got := get(t, s, m.ID)
	if got.Status != bgtype.StatusRunning || got.Instance != "inst-b" || got.Attempt != 2 {
		t.Fatalf("after two claims: status %s, instance %q, attempt %d; want running on inst-b, attempt 2", got.Status, got.Instance, got.Attempt)
	}
	if kq, ok := s.(store.KindQueue); ok {
		if waiting, err := kq.WaitingTasks(t.Context(), 10); err != nil || len(waiting) != 0 {
			t.Fatalf("WaitingTasks after the claim = %v, %v; want none", idsOf(waiting), err)
		}
	}
	late := m // attempt 1's save, after it was superseded
	late.Resume = m.Resume.Clone()
	late.Resume.Checkpoint, late.Resume.SavedAt = json.RawMessage(`{"page":9}`), at(5)
	commit(t, s, "alice", store.UpsertAction(late))
	if got := get(t, s, m.ID); string(got.Resume.Checkpoint) != `{"page":2}` || got.Attempt != 2 {
		t.Fatalf("a superseded save landed: checkpoint %s, attempt %d", got.Resume.Checkpoint, got.Attempt)
	}
}
