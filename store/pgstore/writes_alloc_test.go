package pgstore

import (
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// A commit's rows are gathered with one allocation a column (newWrites
// sizes them for its records), not one at each doubling of 32 slices: 8
// records took 126 allocations before (decision 807).
func TestWritesAllocateOnceAColumn(t *testing.T) {
	metas := make([]bgtype.TaskMeta, 8)
	for i := range metas {
		metas[i] = bgtype.TaskMeta{ID: fmt.Sprintf("task_%d", i), Owner: "alice", Status: bgtype.StatusRunning}
	}
	for _, version := range []int64{0, 3} { // inserts, then updates
		allocs := testing.AllocsPerRun(20, func() {
			w := newWrites(len(metas))
			for i := range metas {
				w.put(&metas[i], version)
			}
		})
		if want := 1 + 32 + 1; allocs > float64(want) { // the writes, its 32 columns, the records' slice
			t.Errorf("version %d: %v allocations for 8 rows, want at most %d", version, allocs, want)
		}
	}
}
