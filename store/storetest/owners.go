package storetest

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testOwnerIsolation: one owner's commits never see, change or move
// another owner's records.
func testOwnerIsolation(t *testing.T, c Config) {
	const a, b = "owner-a", "owner-b"
	bLive := rec("task_b_live", b, bgtype.StatusRunning, 1)
	bLive.Description = "b's"
	bDone := ended(rec("task_b_done", b, bgtype.StatusRunning, 2), bgtype.StatusCompleted, 3)
	aLive := rec("task_a_live", a, bgtype.StatusRunning, 4)

	// claim returns b's record id as if owner a had it.
	claim := func(m bgtype.TaskMeta, st bgtype.Status) bgtype.TaskMeta {
		m.Owner, m.Status, m.Description = a, st, "stolen"
		return m
	}
	cases := []struct {
		name    string
		actions []store.Action
		wantErr bool // ErrInvalidAction, else nil
	}{
		{"commit of b's task under owner a", []store.Action{store.UpsertAction(bLive)}, true},
		{"replace all with b's task under owner a", []store.Action{store.ReplaceAllAction(aLive, bLive)}, true},
		{"upsert of b's live id as owner a's", []store.Action{store.UpsertAction(claim(bLive, bgtype.StatusFailed))}, false},
		{"upsert of b's terminal id as owner a's", []store.Action{store.UpsertAction(claim(bDone, bgtype.StatusRunning))}, false},
		{"replace all with b's ids as owner a's", []store.Action{store.ReplaceAllAction(aLive, claim(bLive, bgtype.StatusCompleted), claim(bDone, bgtype.StatusCompleted))}, false},
		{"replace all of owner a with nothing", []store.Action{store.ReplaceAllAction()}, false},
		{"remove of b's terminal id by owner a", []store.Action{store.RemoveAction(bDone.ID)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := c.New(t)
			commit(t, s, b, store.UpsertAction(bLive), store.UpsertAction(bDone))
			commit(t, s, a, store.UpsertAction(aLive))
			bBefore := load(t, s, b)

			err := s.Commit(t.Context(), a, tc.actions...)
			if tc.wantErr {
				wantErr(t, "Commit", err, store.ErrInvalidAction)
			} else if err != nil {
				t.Errorf("Commit: %v, want nil (the reducer drops an update of another owner's id, it is not an error)", err)
			}
			if d := diffSnap(bBefore, load(t, s, b)); d != "" {
				t.Errorf("owner b's snapshot changed:\n%s", d)
			}
			for _, m := range []bgtype.TaskMeta{bLive, bDone} {
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
