package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// TestWorkerExitsAfterTimedOutShutdown: after a Shutdown that timed out,
// the goroutine of a task released later exits at once instead of parking
// as an idle worker: nothing can start any more. Parked workers are told to
// exit when Shutdown begins, not only once every task has ended.
func TestWorkerExitsAfterTimedOutShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		completeOne(t, m, 1) // one worker parked before Shutdown
		if n := len(idleWorkers(m)); n != 1 {
			t.Fatalf("%d idle workers before Shutdown, want 1", n)
		}
		release := gate(t)
		id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
			<-release // ignores ctx on purpose
			return "late", nil
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want a deadline error", err)
		}
		synctest.Wait()
		if n := len(idleWorkers(m)); n != 0 {
			t.Fatalf("%d idle workers after Shutdown began, want 0", n)
		}
		close(release)
		waitStatus(t, m, id, bgtype.StatusCompleted)
		start := time.Now()
		synctest.Wait()
		if n := len(idleWorkers(m)); n != 0 {
			t.Fatalf("%d idle workers after the released task ended, want 0", n)
		}
		// Every worker goroutine has exited: the pool's wait returns without
		// the clock moving (a parked worker would wait for its idle timer).
		m.workers.Wait()
		if d := time.Since(start); d != 0 {
			t.Fatalf("worker goroutines exited after %v of fake time, want 0", d)
		}
		shutdownManager(t, m)
	})
}
