package storetest

import (
	"testing"

	"github.com/bgtask/bgtask"
)

// testOwnerIsolation: one owner's commits never see, change or move
// another owner's records.
func testOwnerIsolation(t *testing.T, c Config) {
	const a, b = "owner-a", "owner-b"
	bLive := rec("task_b_live", b, bgtask.StatusRunning, 1)
	bLive.Description = "b's"
	bDone := ended(rec("task_b_done", b, bgtask.StatusRunning, 2), bgtask.StatusCompleted, 3)
	aLive := rec("task_a_live", a, bgtask.StatusRunning, 4)

	// claim returns b's record id as if owner a had it.
	claim := func(m bgtask.TaskMeta, st bgtask.TaskStatus) bgtask.TaskMeta {
		m.Owner, m.Status, m.Description = a, st, "stolen"
		return m
	}
	cases := []struct {
		name    string
		actions []bgtask.Action
		wantErr bool // ErrInvalidAction, else nil
	}{
		{"commit of b's task under owner a", []bgtask.Action{bgtask.Upsert(bLive)}, true},
		{"replace all with b's task under owner a", []bgtask.Action{bgtask.ReplaceAll(aLive, bLive)}, true},
		{"upsert of b's live id as owner a's", []bgtask.Action{bgtask.Upsert(claim(bLive, bgtask.StatusFailed))}, false},
		{"upsert of b's terminal id as owner a's", []bgtask.Action{bgtask.Upsert(claim(bDone, bgtask.StatusRunning))}, false},
		{"replace all with b's ids as owner a's", []bgtask.Action{bgtask.ReplaceAll(aLive, claim(bLive, bgtask.StatusCompleted), claim(bDone, bgtask.StatusCompleted))}, false},
		{"replace all of owner a with nothing", []bgtask.Action{bgtask.ReplaceAll()}, false},
		{"remove of b's terminal id by owner a", []bgtask.Action{bgtask.Remove(bDone.ID)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := c.New(t)
			commit(t, s, b, bgtask.Upsert(bLive), bgtask.Upsert(bDone))
			commit(t, s, a, bgtask.Upsert(aLive))
			bBefore := load(t, s, b)

			err := s.Commit(t.Context(), a, tc.actions...)
			if tc.wantErr {
				wantErr(t, "Commit", err, bgtask.ErrInvalidAction)
			} else if err != nil {
				t.Errorf("Commit: %v, want nil (the reducer drops an update of another owner's id, it is not an error)", err)
			}
			if d := diffSnap(bBefore, load(t, s, b)); d != "" {
				t.Errorf("owner b's snapshot changed:\n%s", d)
			}
			for _, m := range []bgtask.TaskMeta{bLive, bDone} {
				if d := diffMeta(m, get(t, s, m.ID)); d != "" {
					t.Errorf("Get(%s) changed:\n%s", m.ID, d)
				}
			}
			snapA := load(t, s, a)
			for _, id := range []string{bLive.ID, bDone.ID} {
				if _, ok := snapA.Tasks[id]; ok {
					t.Errorf("Load(owner a) holds owner b's %s", id)
				}
			}
			for m, err := range s.List(t.Context(), a) {
				if err != nil {
					t.Errorf("List(owner a): %v", err)
				} else if m.Owner != a {
					t.Errorf("List(owner a) yields %s of owner %q", m.ID, m.Owner)
				}
			}
		})
	}
}
