package storetest

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testAnnounce: Announce marks the owner's terminal records only (a live,
// unknown or other owner's id is dropped, not an error), the mark survives
// later updates and a same-status re-mirror, and List reports it.
func testAnnounce(t *testing.T, c Config) {
	const owner, other = "owner-announce", "owner-other"
	done := ended(rec("task_done", owner, bgtype.StatusRunning, 1), bgtype.StatusCompleted, 4)
	done.Result = []byte(`{"n":1}`)
	failed := ended(rec("task_failed", owner, bgtype.StatusRunning, 2), bgtype.StatusFailed, 5)
	live := rec("task_live", owner, bgtype.StatusRunning, 3)
	theirs := ended(rec("task_theirs", other, bgtype.StatusRunning, 1), bgtype.StatusCompleted, 6)
	s := runSteps(t, c, owner, []step{
		{"seed", []store.Action{store.UpsertAction(done), store.UpsertAction(failed), store.UpsertAction(live)}},
		{"announce", []store.Action{store.AnnounceAction("task_done", "task_live", "task_unknown")}},
		{"announce nothing", []store.Action{store.AnnounceAction()}},
		{"re-mirror keeps the mark", []store.Action{store.UpsertAction(done)}},
		{"announce twice", []store.Action{store.AnnounceAction("task_done")}},
	})
	commit(t, s, other, store.UpsertAction(theirs))
	commit(t, s, owner, store.AnnounceAction("task_theirs"))
	if got := get(t, s, "task_theirs"); got.Announced {
		t.Errorf("another owner's Announce marked task_theirs")
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"task_done", true}, {"task_failed", false}, {"task_live", false}} {
		if got := get(t, s, tc.id); got.Announced != tc.want {
			t.Errorf("Get(%s).Announced = %v, want %v", tc.id, got.Announced, tc.want)
		}
	}
	var marked []string
	for m, err := range s.List(t.Context(), owner, bgtype.StatusCompleted, bgtype.StatusFailed) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if m.Announced {
			marked = append(marked, m.ID)
		}
	}
	wantIDs(t, "announced ids in List", marked, []string{"task_done"})
}
