package storetest

import (
	"testing"

	"github.com/bgtask/bgtask"
)

// testAnnounce: Announce marks the owner's terminal records only (a live,
// unknown or other owner's id is dropped, not an error), the mark survives
// later updates and a same-status re-mirror, and List reports it.
func testAnnounce(t *testing.T, c Config) {
	const owner, other = "owner-announce", "owner-other"
	done := ended(rec("task_done", owner, bgtask.StatusRunning, 1), bgtask.StatusCompleted, 4)
	done.Result = []byte(`{"n":1}`)
	failed := ended(rec("task_failed", owner, bgtask.StatusRunning, 2), bgtask.StatusFailed, 5)
	live := rec("task_live", owner, bgtask.StatusRunning, 3)
	theirs := ended(rec("task_theirs", other, bgtask.StatusRunning, 1), bgtask.StatusCompleted, 6)
	s := runSteps(t, c, owner, []step{
		{"seed", []bgtask.Action{bgtask.Upsert(done), bgtask.Upsert(failed), bgtask.Upsert(live)}},
		{"announce", []bgtask.Action{bgtask.Announce("task_done", "task_live", "task_unknown")}},
		{"announce nothing", []bgtask.Action{bgtask.Announce()}},
		{"re-mirror keeps the mark", []bgtask.Action{bgtask.Upsert(done)}},
		{"announce twice", []bgtask.Action{bgtask.Announce("task_done")}},
	})
	commit(t, s, other, bgtask.Upsert(theirs))
	commit(t, s, owner, bgtask.Announce("task_theirs"))
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
	for m, err := range s.List(t.Context(), owner, bgtask.StatusCompleted, bgtask.StatusFailed) {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if m.Announced {
			marked = append(marked, m.ID)
		}
	}
	wantIDs(t, "announced ids in List", marked, []string{"task_done"})
}
