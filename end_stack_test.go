package bgtask

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

// TestEndFitsGrownStack: the end of a task that completes plainly, on a
// goroutine started for it, grows its stack once, at the bottom
// (stackgrow.Grow: from the first 2 KiB to 4 KiB), not a second time deep
// in the commit (to 8 KiB, copying every frame above). Measured as the
// stacks in use by tasks parked in their function against the same
// goroutines parked as idle workers after their ends, the collector off
// so that no stack shrinks meanwhile (decision 753). Not under the race
// detector, whose instrumented frames need more.
func TestEndFitsGrownStack(t *testing.T) {
	if raceBuild() {
		t.Skip("the race detector's frames are larger: measured without -race")
	}
	const n = 32
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
		// One growth, 2 to 4 KiB, is 2,048 bytes a task (less when some first
		// stacks are larger); a second, to 8 KiB, makes it 6,144.
		if grown > 5120 {
			t.Errorf("each task's stack grew by %d bytes, want at most 5120 (one growth, from 2 KiB to 4 KiB)", grown)
		}
	})
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// stackInuse returns the bytes of goroutine stacks in use.
func stackInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.StackInuse)
}
