package bgtask

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Shutdown cancels every task with cause ErrShutdown; what the function
// returns then decides the terminal status (a cancel asks, it does not force).
func TestShutdownCancelsTasksWithCause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		tests := []struct {
			name    string
			ret     func(ctx context.Context) (any, error)
			status  bgtype.Status
			errText string
			result  string
		}{
			{"returns the cause", func(ctx context.Context) (any, error) { return nil, context.Cause(ctx) }, bgtype.StatusCanceled, ErrShutdown.Error(), ""},
			{"returns ctx.Err", func(ctx context.Context) (any, error) { return nil, ctx.Err() }, bgtype.StatusCanceled, ErrShutdown.Error(), ""},
			{"wraps ctx.Err", func(ctx context.Context) (any, error) { return nil, fmt.Errorf("stopping: %w", ctx.Err()) }, bgtype.StatusCanceled, ErrShutdown.Error(), ""},
			{"returns a value", func(ctx context.Context) (any, error) { return "partial", nil }, bgtype.StatusCompleted, "", `"partial"`},
			{"returns another error", func(ctx context.Context) (any, error) { return nil, errors.New("flush failed") }, bgtype.StatusFailed, "flush failed", ""},
		}
		causes := make(chan error, len(tests))
		ids := make([]string, len(tests))
		for i, tc := range tests {
			ids[i] = spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return tc.ret(ctx)
			}, WithName(fmt.Sprint("t", i)))
		}
		synctest.Wait()
		start := time.Now()
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Shutdown took %v of fake time, want 0", d)
		}
		for range tests {
			if c := <-causes; c != ErrShutdown {
				t.Fatalf("context.Cause = %v, want ErrShutdown", c)
			}
		}
		for i, tc := range tests {
			meta := getTask(t, m, ids[i])
			if meta.Status != tc.status || meta.Error != tc.errText || string(meta.Result) != tc.result {
				t.Fatalf("%s: (%q, %q, %s), want (%q, %q, %s)", tc.name, meta.Status, meta.Error, meta.Result, tc.status, tc.errText, tc.result)
			}
			if meta.FinishedAt.IsZero() {
				t.Fatalf("%s: no finish stamp", tc.name)
			}
		}
		// Every terminal event is in the owner's inbox once Shutdown returned.
		got := drainKindIDs(t, m, "a")
		want := make([]kindID, len(tests))
		for i, tc := range tests {
			want[i] = kindID{bgtype.EventKind(tc.status), ids[i]}
		}
		byID := func(x, y kindID) int { return cmp.Compare(x.ID, y.ID) }
		slices.SortFunc(got, byID)
		slices.SortFunc(want, byID)
		if !slices.Equal(got, want) {
			t.Fatalf("events after Shutdown %v, want %v", got, want)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.nodes) != 0 || len(m.owners) != 0 || m.active != 0 {
			t.Fatalf("after Shutdown: %d nodes, %d owners, %d active", len(m.nodes), len(m.owners), m.active)
		}
	})
}

// Once Shutdown began, spawns fail with ErrClosed, nested ones included,
// while Shutdown waits for the tasks still running.
func TestShutdownRefusesSpawnsOnceBegun(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		release := gate(t)
		nested := make(chan error, 1)
		id := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) {
			<-ctx.Done()
			_, err := m.Owner(tk.Owner()).Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil })
			nested <- err
			<-release
			return nil, ctx.Err()
		})
		done := make(chan error, 1)
		go func() { done <- m.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v while a task was running", err)
		default:
		}
		if err := <-nested; !errors.Is(err, ErrClosed) {
			t.Fatalf("nested spawn during Shutdown: %v, want ErrClosed", err)
		}
		ran := false
		fn := func(context.Context, *Task) (any, error) { ran = true; return nil, nil }
		if _, err := m.Owner("a").Spawn(t.Context(), fn); !errors.Is(err, ErrClosed) {
			t.Fatalf("Spawn during Shutdown: %v, want ErrClosed", err)
		}
		if _, err := m.Owner("b").SpawnAgent(t.Context(), fn); !errors.Is(err, ErrClosed) {
			t.Fatalf("SpawnAgent during Shutdown: %v, want ErrClosed", err)
		}
		if got := getTask(t, m, id).Status; got != bgtype.StatusRunning {
			t.Fatalf("status while Shutdown waits: %q, want running", got)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if ran {
			t.Fatal("a refused task ran")
		}
		if n := countRecords(t, m, "a"); n != 1 {
			t.Fatalf("store holds %d records for a, want 1", n)
		}
		if n := countRecords(t, m, "b"); n != 0 {
			t.Fatalf("store holds %d records for b, want 0", n)
		}
		if got := getTask(t, m, id); got.Status != bgtype.StatusCanceled || got.Error != ErrShutdown.Error() {
			t.Fatalf("final: %q %q, want cancelled %q", got.Status, got.Error, ErrShutdown.Error())
		}
	})
}

// A task that ignores cancellation makes Shutdown return at ctx's deadline
// with a *ShutdownError naming it; a later Shutdown waits for it again.
func TestShutdownDeadlineNamesStubbornTask(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		release := gate(t)
		stubborn := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-release // ignores ctx on purpose
			return "late", nil
		})
		polite := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		synctest.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := m.Shutdown(ctx)
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Shutdown returned after %v, want 2s", d)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want context.DeadlineExceeded", err)
		}
		var se *ShutdownError
		if !errors.As(err, &se) {
			t.Fatalf("Shutdown: %T, want *ShutdownError", err)
		}
		if !slices.Equal(se.Running, []string{stubborn}) || se.Finishing != 0 {
			t.Fatalf("ShutdownError: Running %v Finishing %d, want [%s] and 0", se.Running, se.Finishing, stubborn)
		}
		wantText := fmt.Sprintf("bgtask: shutdown: 1 task(s) did not stop (%s), 0 finishing: context deadline exceeded", stubborn)
		if err.Error() != wantText {
			t.Fatalf("error text %q, want %q", err.Error(), wantText)
		}
		waitStatus(t, m, polite, bgtype.StatusCanceled)
		if got := getTask(t, m, stubborn).Status; got != bgtype.StatusRunning {
			t.Fatalf("stubborn task after the failed Shutdown: %q, want running", got)
		}
		if _, err := m.Owner("a").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Spawn after a failed Shutdown: %v, want ErrClosed", err)
		}

		close(release)
		start = time.Now()
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("second Shutdown took %v, want 0", d)
		}
		// A cancel asks, it does not force: the value it returned stands.
		meta := getTask(t, m, stubborn)
		if meta.Status != bgtype.StatusCompleted || string(meta.Result) != `"late"` {
			t.Fatalf("stubborn task: %q %s, want completed \"late\"", meta.Status, meta.Result)
		}
	})
}

func TestShutdownErrorShowsTenIDs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		release := gate(t)
		var ids []string
		for range 12 {
			ids = append(ids, spawnFor(t, m, "a", func(context.Context, *Task) (any, error) {
				<-release
				return nil, nil
			}))
		}
		slices.Sort(ids)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := m.Shutdown(ctx)
		se, ok := errors.AsType[*ShutdownError](err)
		if !ok {
			t.Fatalf("Shutdown: %v, want a *ShutdownError", err)
		}
		if !slices.Equal(se.Running, ids) {
			t.Fatalf("Running %v, want the 12 ids sorted %v", se.Running, ids)
		}
		want := fmt.Sprintf("bgtask: shutdown: 12 task(s) did not stop (%s and 2 more), 0 finishing: context deadline exceeded",
			strings.Join(ids[:10], ", "))
		if err.Error() != want {
			t.Fatalf("error text\n%q, want\n%q", err.Error(), want)
		}
		close(release)
		shutdownManager(t, m)
	})
}

// A task whose function returned but whose terminal record is still being
// retried is finishing, not running.
func TestShutdownErrorCountsFinishingTasks(t *testing.T) {
	t.Parallel()
	var bug string
	synctest.Test(t, func(t *testing.T) {
		st := newFailingStore()
		m := newTestManager(t, WithStore(st), WithTuning(Tuning{CommitAttempts: 3, CommitBackoff: time.Minute}))
		st.failTerminal(-1)
		returned := make(chan struct{})
		id := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			close(returned)
			return nil, ctx.Err()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err := m.Shutdown(ctx)
		<-returned
		se, ok := errors.AsType[*ShutdownError](err)
		if !ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want a *ShutdownError with DeadlineExceeded", err)
		}
		if len(se.Running) != 0 || se.Finishing != 1 {
			bug = fmt.Sprintf("a task whose function returned must count as finishing, not running: "+
				"ShutdownError Running %v Finishing %d, want [] and 1 (the function of %s returned)", se.Running, se.Finishing, id)
		}
		// A second Shutdown waits out the retries: 1m + 2m.
		start := time.Now()
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if d := time.Since(start); d != 3*time.Minute-2*time.Second {
			t.Fatalf("second Shutdown took %v, want the rest of the backoff", d)
		}
		evs := drainKindIDs(t, m, "a")
		if want := []kindID{{bgtype.EventCommitFailed, id}, {bgtype.EventCanceled, id}}; !slices.Equal(evs, want) {
			t.Fatalf("events %v, want %v", evs, want)
		}
	})
	if bug != "" {
		t.Fatal(bug)
	}
}

// After Shutdown began, every call that changes something returns
// ErrClosed; reads keep working.
func TestShutdownClosedManager(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("a")
		done := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return 1, nil })
		waitStatus(t, m, done, bgtype.StatusCompleted)
		agent, err := o.SpawnAgent(WithToolCall(t.Context(), ToolCall{RunID: "r1"}), func(ctx context.Context, tk *Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, WithName("helper"))
		if err != nil {
			t.Fatal(err)
		}
		shutdownManager(t, m)

		fn := func(context.Context, *Task) (any, error) { return nil, nil }
		msg := bgtype.Message{From: "a", Content: "hi"}
		bg := context.Background()
		calls := []struct {
			name string
			call func() error
		}{
			{"Owner.Spawn", func() error { _, err := o.Spawn(bg, fn); return err }},
			{"Owner.Spawn nil func", func() error { _, err := o.Spawn(bg, nil); return err }},
			{"Owner.SpawnAgent", func() error { _, err := o.SpawnAgent(bg, fn); return err }},
			{"Manager.Cancel", func() error { _, err := m.Cancel(bg, done); return err }},
			{"Manager.Cancel unknown", func() error { _, err := m.Cancel(bg, "task_x"); return err }},
			{"Manager.CancelTree", func() error { _, err := m.CancelTree(bg, agent); return err }},
			{"Owner.Cancel", func() error { _, err := o.Cancel(bg, done); return err }},
			{"Owner.CancelTree", func() error { _, err := o.CancelTree(bg, agent); return err }},
			{"Owner.CancelAll", func() error { _, err := m.Owner("a").CancelAll(); return err }},
			{"Owner.CancelAll", func() error { _, err := o.CancelAll(); return err }},
			{"Manager.CancelRun", func() error { _, err := m.CancelRun("a", "r1"); return err }},
			{"Manager.Send", func() error { _, err := m.Send(bg, "a", agent, msg); return err }},
			{"Manager.CancelAll", func() error { _, err := m.CancelAll(); return err }},
			{"Owner.Send", func() error { _, err := o.Send(bg, agent, msg); return err }},
			{"Manager.BindInbox", func() error { _, err := m.BindInbox("a", NewInbox(InboxConfig{})); return err }},
		}
		for _, c := range calls {
			if err := c.call(); err != ErrClosed {
				t.Errorf("%s on a closed manager: %v, want ErrClosed", c.name, err)
			}
		}

		if meta, err := m.Get(bg, done); err != nil || meta.Status != bgtype.StatusCompleted || string(meta.Result) != "1" {
			t.Fatalf("Manager.Get: (%q %s, %v), want completed 1", meta.Status, meta.Result, err)
		}
		if meta, err := o.Get(bg, agent); err != nil || meta.Status != bgtype.StatusCanceled || meta.Parent.RunID != "r1" {
			t.Fatalf("Owner.Get: (%+v, %v), want cancelled in run r1", meta, err)
		}
		if listed := taskIDs(listTasks(t, o)); !slices.Equal(listed, []string{done, agent}) {
			t.Fatalf("Owner.List: %v, want [%s %s]", listed, done, agent)
		}
		if meta, err := m.Wait(bg, done); err != nil || meta.Status != bgtype.StatusCompleted {
			t.Fatalf("Manager.Wait: (%q, %v), want completed", meta.Status, err)
		}
		if meta, err := o.Wait(bg, agent); err != nil || meta.Status != bgtype.StatusCanceled {
			t.Fatalf("Owner.Wait: (%q, %v), want cancelled", meta.Status, err)
		}
		ib, err := o.Inbox()
		if err != nil || ib == nil {
			t.Fatalf("Owner.Inbox: (%v, %v)", ib, err)
		}
		want := []kindID{{bgtype.EventCompleted, done}, {bgtype.EventCanceled, agent}}
		if got := drainKindIDs(t, m, "a"); !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if _, err := m.Inbox("fresh-owner"); err != nil {
			t.Fatalf("Manager.Inbox for a new owner after Shutdown: %v", err)
		}
	})
}

func TestShutdownConcurrentCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var ids []string
		for i := range 5 {
			ids = append(ids, spawnFor(t, m, fmt.Sprint("owner-", i%2), func(ctx context.Context, _ *Task) (any, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}))
		}
		synctest.Wait()
		const callers = 8
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() { errs <- m.Shutdown(context.Background()) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent Shutdown: %v", err)
			}
		}
		for _, id := range ids {
			if got := getTask(t, m, id).Status; got != bgtype.StatusCanceled {
				t.Fatalf("%s: %q, want cancelled", id, got)
			}
		}
		if err := m.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown after Shutdown: %v", err)
		}
	})
}

// Shutdown is "safe to call more than once": once every task has stopped,
// a call with a context that is already done has nothing to wait for.
func TestShutdownStoppedManagerWithDoneContext(t *testing.T) {
	t.Parallel()
	var bug string
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return nil, nil })
		waitStatus(t, m, id, bgtype.StatusCompleted)
		shutdownManager(t, m)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		bad := 0
		var last error
		for range 100 {
			if err := m.Shutdown(ctx); err != nil {
				bad, last = bad+1, err
			}
		}
		if bad > 0 {
			bug = fmt.Sprintf("a stopped manager must shut down cleanly whatever its ctx: "+
				"%d of 100 Shutdown calls on a stopped manager with a done ctx returned %q, want nil", bad, last)
		}
	})
	if bug != "" {
		t.Fatal(bug)
	}
}

// Spawns racing Shutdown either fail with ErrClosed or run and end with the
// shutdown; after Shutdown returned nil every accepted task is terminal and
// its event delivered. Retention keeps every record: how many spawns are
// accepted before the close depends on the scheduler (more than the
// default 1,000 an owner, once in a loaded CI run).
func TestShutdownRacesSpawns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithRetention(Retention{PerOwner: 1 << 30, Total: 1 << 30}))
		var (
			mu  sync.Mutex
			ids []string
			wg  sync.WaitGroup
		)
		started, some := make(chan struct{}), make(chan struct{})
		var someOnce sync.Once
		for range 8 {
			wg.Go(func() {
				<-started
				for {
					id, err := m.Owner("a").Spawn(context.Background(), func(ctx context.Context, _ *Task) (any, error) {
						<-ctx.Done()
						return nil, context.Cause(ctx)
					})
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Spawn: %v, want nil or ErrClosed", err)
						}
						return
					}
					mu.Lock()
					ids = append(ids, id)
					if len(ids) == 16 {
						someOnce.Do(func() { close(some) })
					}
					mu.Unlock()
				}
			})
		}
		close(started)
		<-some // Shutdown comes while tasks run and the spawners go on
		if err := m.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		wg.Wait()
		got := drainKindIDs(t, m, "a")
		if len(got) != len(ids) {
			t.Fatalf("%d events for %d accepted spawns", len(got), len(ids))
		}
		seen := make(map[string]bool, len(ids))
		for _, ev := range got {
			if ev.Kind != bgtype.EventCanceled || seen[ev.ID] {
				t.Fatalf("event %v (seen before: %v), want one cancelled event per task", ev, seen[ev.ID])
			}
			seen[ev.ID] = true
		}
		for _, id := range ids {
			meta := getTask(t, m, id)
			if !seen[id] || meta.Status != bgtype.StatusCanceled || meta.Error != ErrShutdown.Error() {
				t.Fatalf("%s: event %v, status %q error %q, want cancelled by shutdown", id, seen[id], meta.Status, meta.Error)
			}
		}
	})
}

// Shutdown releases everyone blocked on the Manager: a consumer in
// Inbox.Wait gets the final events, then ErrClosed; Plugin.WaitEvent returns
// ErrClosed; a waiter that comes later returns at once.
func TestShutdownReleasesInboxWaiters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		id, err := o.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		type consumed struct {
			evs []bgtype.Event
			err error
		}
		consumer := make(chan consumed, 1)
		go func() {
			var evs []bgtype.Event
			for {
				if err := ib.Wait(context.Background()); err != nil {
					consumer <- consumed{evs, err}
					return
				}
				evs = ib.AppendDrain(evs)
			}
		}()
		p, err := m.NewReceiver("thread-2", ReceiverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- p.WaitEvent(context.Background()) }()
		synctest.Wait()

		shutdownManager(t, m)
		got := <-consumer
		if !errors.Is(got.err, ErrClosed) || len(got.evs) != 1 || got.evs[0].Kind != bgtype.EventCanceled || got.evs[0].TaskID != id {
			t.Fatalf("consumer got %+v, %v; want the cancelled event, then ErrClosed", got.evs, got.err)
		}
		if err := <-waited; !errors.Is(err, ErrClosed) {
			t.Fatalf("Plugin.WaitEvent after Shutdown: %v, want ErrClosed", err)
		}
		if err := ib.Wait(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Inbox.Wait after Shutdown: %v, want ErrClosed", err)
		}
		later, err := m.Inbox("thread-3")
		if err != nil {
			t.Fatal(err)
		}
		if err := later.Wait(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait on an inbox made after Shutdown: %v, want ErrClosed", err)
		}
		if err := p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
	})
}
