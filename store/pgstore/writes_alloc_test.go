package pgstore

import (
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// A commit's rows are gathered with one allocation a column (newWrites
// sizes them for its records), not one at each doubling of 32 slices
// (decision 807): for 8 rows, 34 allocations against 126 (63 against 126
// under the race detector, which allocates in add too).
func TestWritesAllocateOnceAColumn(t *testing.T) {
	metas := make([]bgtype.TaskMeta, 8)
	for i := range metas {
		metas[i] = bgtype.TaskMeta{ID: fmt.Sprintf("task_%d", i), Owner: "alice", Status: bgtype.StatusRunning}
	}
	gather := func(rows int, version int64) float64 {
		return testing.AllocsPerRun(20, func() {
			w := newWrites(rows)
			for i := range metas {
				w.put(&metas[i], version)
			}
		})
	}
	for _, version := range []int64{0, 3} { // inserts, then updates
		sized, grown := gather(len(metas), version), gather(0, version)
		if sized > grown*2/3 {
			t.Errorf("version %d: %v allocations for 8 rows sized, %v grown; want at most two thirds", version, sized, grown)
		}
	}
}
