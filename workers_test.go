package bgtask

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/workpool"
)

// idleWorkers returns the parked workers of m, most recently parked last.
func idleWorkers(m *Manager) []*workpool.Worker[Task] { return m.workers.Parked() }

// completeOne spawns a task of owner "a" returning v and waits until its
// goroutine has parked again.
func completeOne(t *testing.T, m *Manager, v any) {
	t.Helper()
	id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return v, nil })
	if got := waitTask(t, m, id); got.Status != bgtype.StatusCompleted {
		t.Fatalf("task %s: status %s, want completed", id, got.Status)
	}
	synctest.Wait()
}

// TestWorkerRunsTheNextTask: the goroutine of a finished task parks and
// runs the next task, instead of a new goroutine.
func TestWorkerRunsTheNextTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		completeOne(t, m, 1)
		first := idleWorkers(m)
		if len(first) != 1 {
			t.Fatalf("%d idle workers after one task, want 1", len(first))
		}
		completeOne(t, m, 2)
		second := idleWorkers(m)
		if len(second) != 1 || second[0] != first[0] {
			t.Fatalf("idle workers %p after the second task, want the same one %p", second, first[0])
		}
		shutdownManager(t, m)
		if n := len(idleWorkers(m)); n != 0 {
			t.Fatalf("%d idle workers after Shutdown, want 0", n)
		}
	})
}

// TestWorkerIdleExpires: a parked worker that gets no task exits after
// between one and two workpool.IdleTimeout periods; the next task starts a new one.
func TestWorkerIdleExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		completeOne(t, m, 1)
		w := idleWorkers(m)
		<-time.After(workpool.IdleTimeout + workpool.IdleTimeout/2) // fake time: the bubble's clock
		synctest.Wait()
		if got := idleWorkers(m); len(got) != 1 || got[0] != w[0] {
			t.Fatalf("idle workers %p after 1.5 periods, want still %p", got, w[0])
		}
		<-time.After(workpool.IdleTimeout)
		synctest.Wait()
		if n := len(idleWorkers(m)); n != 0 {
			t.Fatalf("%d idle workers after 2.5 periods, want 0", n)
		}
		completeOne(t, m, 2)
		if got := idleWorkers(m); len(got) != 1 || got[0] == w[0] {
			t.Fatalf("idle workers %p after a new task, want one new worker", got)
		}
	})
}

// TestWorkerIdleBound: at most the pool's bound of goroutines park; the others
// exit when their task ends.
func TestWorkerIdleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		m.workers.SetMax(2)
		release := make(chan struct{})
		ids := make([]string, 5)
		for i := range ids {
			ids[i] = spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
				<-release
				return nil, nil
			})
		}
		synctest.Wait()
		close(release)
		for _, id := range ids {
			waitTask(t, m, id)
		}
		synctest.Wait()
		if n := len(idleWorkers(m)); n != 2 {
			t.Fatalf("%d idle workers, want 2", n)
		}
	})
}

// TestParkedWorkerKeepsNoTask: once a task ended, its parked goroutine
// keeps neither the Task nor the values of the spawn's context alive.
func TestParkedWorkerKeepsNoTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		type payload struct{ b [4096]byte }
		type key struct{}
		v := new(payload)
		seen := weak.Make(v)
		ctx := context.WithValue(t.Context(), key{}, v)
		var task weak.Pointer[Task]
		id, err := m.Owner("a").Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
			task = weak.Make(tk)
			return len(ctx.Value(key{}).(*payload).b), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := waitTask(t, m, id); got.Status != bgtype.StatusCompleted || string(got.Result) != "4096" {
			t.Fatalf("task: %s %s, want completed 4096", got.Status, got.Result)
		}
		ctx, v = nil, nil
		synctest.Wait()
		if n := len(idleWorkers(m)); n != 1 {
			t.Fatalf("%d idle workers, want 1", n)
		}
		runtime.GC()
		runtime.GC()
		if seen.Value() != nil || task.Value() != nil {
			t.Fatalf("after GC: context value kept %v, task kept %v; want neither", seen.Value() != nil, task.Value() != nil)
		}
	})
}

// labelledParked blocks until release is closed; its name marks its
// goroutine in a goroutine profile.
func labelledParked(release chan struct{}) Func {
	return func(context.Context, *Task) (any, error) {
		<-release
		return nil, nil
	}
}

// TestWorkerTakesTheSpawnLabels: a task runs with the profiler labels of
// its spawn's context, not those of the task its goroutine ran before.
func TestWorkerTakesTheSpawnLabels(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("a")
	var first string
	pprof.Do(t.Context(), pprof.Labels("bgtask_test_owner", "first"), func(ctx context.Context) {
		first = spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return nil, nil })
	})
	waitTask(t, m, first)
	// The first task's goroutine parks after its event; the second task
	// runs on it once it has.
	for len(idleWorkers(m)) == 0 {
		runtime.Gosched()
	}
	release := make(chan struct{})
	var second string
	pprof.Do(t.Context(), pprof.Labels("bgtask_test_owner", "second"), func(ctx context.Context) {
		var err error
		if second, err = o.Spawn(ctx, labelledParked(release)); err != nil {
			t.Fatal(err)
		}
	})
	var buf bytes.Buffer
	for !strings.Contains(buf.String(), "labelledParked") {
		buf.Reset()
		if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	close(release)
	waitTask(t, m, second)
	for _, stack := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(stack, "labelledParked") && !strings.Contains(stack, `# labels: {"bgtask_test_owner":"second"}`) {
			t.Fatalf("the second task runs without its spawn's labels:\n%s", stack)
		}
	}
}
