package reduce

import (
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// OutputBytes merges as CancelReason does (store.Apply's table): an update
// with a status sets it on a live record, one without sets it when it has
// one, and a terminal record takes it only when it has none.
func TestMergeOutputBytes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(st bgtype.Status, n int64) bgtype.TaskMeta {
		return bgtype.TaskMeta{ID: "task_a", Owner: "o", Status: st, CreatedAt: at, StartedAt: at, OutputBytes: n}
	}
	tests := []struct {
		name    string
		cur, u  bgtype.TaskMeta
		want    int64
		applied bool
	}{
		{"an end sets the update's", rec(bgtype.StatusRunning, 0), rec(bgtype.StatusCompleted, 11), 11, true},
		{"an update with a status sets the update's, 0 too", rec(bgtype.StatusRunning, 5), rec(bgtype.StatusRunning, 0), 0, true},
		{"an update without a status sets the update's if set", rec(bgtype.StatusRunning, 5), rec("", 7), 7, true},
		{"an update without a status and without one keeps the record's", rec(bgtype.StatusRunning, 5), rec("", 0), 5, true},
		{"a terminal record takes the one it lacks", rec(bgtype.StatusCompleted, 0), rec("", 11), 11, true},
		{"a terminal record keeps its own", rec(bgtype.StatusCompleted, 11), rec(bgtype.StatusCompleted, 20), 11, true},
		{"another terminal status is dropped whole", rec(bgtype.StatusCompleted, 0), rec(bgtype.StatusFailed, 20), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur, u := tc.cur, tc.u
			if got := MergeUpsert(&cur, &u, at); got != tc.applied {
				t.Fatalf("MergeUpsert = %v, want %v", got, tc.applied)
			}
			if cur.OutputBytes != tc.want {
				t.Fatalf("OutputBytes = %d, want %d", cur.OutputBytes, tc.want)
			}
		})
	}
}
