package bgtask

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/testbuild"
)

// TestEndKeepsFirstStack: the end of a task that completes plainly, on a
// goroutine started for it, does not grow its stack: the result is encoded
// and the end handed to the goroutine that records ends (endSmall) in the
// first 2 KiB. Before decision 770 each grew once, at the bottom
// (stackgrow.Grow, to 4 KiB: 2,048 bytes a task); before 753 a second
// time deep in the commit (6,144). Measured as the stacks in use by tasks
// parked in their function against the same goroutines parked as idle
// workers after their ends, the collector off so that no stack shrinks
// meanwhile; the recorder's own stack, freed to the stack caches, is
// spread over the tasks. Not under the race detector, whose instrumented
// frames need more.
func TestEndKeepsFirstStack(t *testing.T) {
	if testbuild.Race() {
		t.Skip("the race detector's frames are larger: measured without -race")
	}
	const n = 128
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		m.workers.SetMax(n) // every worker parks: its stack stays in use
		release := make([]chan struct{}, n)
		ids := make([]string, n)
		for i := range ids {
			release[i] = make(chan struct{})
			ids[i] = spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
				<-release[i]
				return 42, nil
			})
		}
		synctest.Wait()
		before := stackInuse()
		for i, id := range ids { // one end at a time: each records its own, and its worker parks
			close(release[i])
			if got := waitTask(t, m, id); got.Status != bgtype.StatusCompleted || string(got.Result) != "42" {
				t.Fatalf("task %s: %s %s, want completed 42", id, got.Status, got.Result)
			}
			synctest.Wait()
		}
		synctest.Wait()
		if k := len(idleWorkers(m)); k != n {
			t.Fatalf("%d idle workers, want %d", k, n)
		}
		grown := (stackInuse() - before) / n
		t.Logf("stack grown by %d bytes a task", grown)
		// One growth, 2 to 4 KiB, is 2,048 bytes a task; the recorder's stack
		// spread over the tasks is 0-256, and the stacks of goroutines not
		// the test's (the runtime's, the testing package's) move the figure
		// by a few hundred more on a loaded machine (768 once in 60 runs):
		// half a growth tells the two apart.
		if grown > 1024 {
			t.Errorf("each task's stack grew by %d bytes, want at most 1024 (none grew)", grown)
		}
	})
}

// stackInuse returns the bytes of goroutine stacks in use.
func stackInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.StackInuse)
}
