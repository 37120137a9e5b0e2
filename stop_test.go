package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Stop waits for running tasks exactly until its context's deadline, then
// cuts what still runs: interrupted, its late result discarded, counted as
// interrupted; a task that ended in time keeps its own end.
func TestStopCutsAtTheDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithInstance("inst-deploy"))
		quick := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(3 * time.Second):
				return "in time", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		causes := make(chan error, 1)
		slow := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(time.Hour):
				return "too late", nil
			case <-ctx.Done():
				causes <- context.Cause(ctx)
				return "late result", nil
			}
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := m.Stop(ctx)
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("Stop returned after %v, want 5s", d)
		}
		want := fmt.Sprintf("bgtask: stop: 1 task(s) still running at the deadline were interrupted (%s): context deadline exceeded", slow)
		se, ok := errors.AsType[*ShutdownError](err)
		// The cut function may or may not have returned yet: Stop does not wait for it.
		if !ok || err.Error() != want || !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(se.Interrupted, []string{slow}) ||
			(se.Running != nil && !slices.Equal(se.Running, []string{slow})) {
			t.Fatalf("Stop: %v, want %q", err, want)
		}
		if c := <-causes; !errors.Is(c, ErrShutdown) || c != errStopCut {
			t.Fatalf("cause seen by the cut task: %v", c)
		}
		if got := getTask(t, m, quick); got.Status != StatusCompleted || string(got.Result) != `"in time"` {
			t.Fatalf("quick task: %q %s, want completed", got.Status, got.Result)
		}
		got := getTask(t, m, slow)
		wantErr := `bgtask: interrupted: the runtime that ran it (instance "inst-deploy") shut down before it ended; it will not be re-run`
		if got.Status != StatusInterrupted || got.Error != wantErr || got.ErrorKind != KindInterrupted || got.Result != nil || got.Attempt != 1 {
			t.Fatalf("slow task: %+v, want interrupted %q on attempt 1", got, wantErr)
		}
		if st := m.Stats(); st.Interrupted != 1 || st.Completed != 1 {
			t.Fatalf("stats: %d interrupted, %d completed; want 1 and 1", st.Interrupted, st.Completed)
		}
		if evs := drainKindIDs(t, m, "a"); !slices.Equal(evs, []kindID{{EventCompleted, quick}, {EventInterrupted, slow}}) {
			t.Fatalf("events %v", evs)
		}
	})
}

// When every running task ends on its own before the deadline, Stop
// returns nil when the last one ends, having cancelled nothing; on an idle
// Manager it returns nil at once, even with a done context.
func TestStopWaitsForTasksToEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		id := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			select {
			case <-time.After(2 * time.Second):
				return "done", nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := m.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Stop returned after %v, want 2s (when the task ended)", d)
		}
		if got := getTask(t, m, id); got.Status != StatusCompleted {
			t.Fatalf("task: %q, want completed", got.Status)
		}
		done, stop := context.WithCancel(t.Context())
		stop()
		if err := m.Stop(done); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if _, err := m.Owner("a").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Spawn after Stop: %v, want ErrClosed", err)
		}
	})
}
