package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// newManager returns a Manager on a new store of c, as instance inst,
// running at most limit tasks at once and queueing the rest. The test stops
// it; a cleanup shuts it down in case the test ended early.
func newManager(t *testing.T, c Config, inst string, limit int) (*bgtask.Manager, store.Store) {
	t.Helper()
	s := c.New(t)
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(inst),
		bgtask.WithLimits(bgtask.Limits{MaxConcurrent: limit, QueueWhenFull: true}))
	if err != nil {
		t.Fatalf("bgtask.New: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m, s
}

// spawn spawns fn for owner o and returns its id.
func spawn(t *testing.T, o bgtask.Owner, fn bgtask.Func, name string) string {
	t.Helper()
	id, err := o.Spawn(context.Background(), fn, bgtask.WithName(name))
	if err != nil {
		t.Fatalf("Spawn %s: %v", name, err)
	}
	return id
}

// endEvents drains the owner's inbox and returns its terminal events by
// task id, failing on a second terminal event for one task.
func endEvents(t *testing.T, m *bgtask.Manager, owner string) map[string]bgtype.Event {
	t.Helper()
	ib, err := m.Inbox(owner)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bgtype.Event{}
	for _, ev := range ib.Drain() {
		if !ev.Kind.IsTerminal() {
			continue
		}
		if _, dup := got[ev.TaskID]; dup {
			t.Errorf("a second terminal event for %s: %+v", ev.TaskID, ev)
		}
		got[ev.TaskID] = ev
	}
	return got
}

// testManagerShutdown: Manager.Shutdown, the hard stop, cancels the running
// task with cause ErrShutdown and drops the queued one; both records and
// events read cancelled with the reason "shutdown", the error text being
// ErrShutdown's. Each task has an owner of its own: the Manager commits
// the ends of tasks concurrently, and commits of different owners do not
// depend on each other.
func testManagerShutdown(t *testing.T, c Config) {
	m, s := newManager(t, c, "inst-hard", 1)
	causes := make(chan error, 1)
	running := spawn(t, m.Owner("owner-a"), func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}, "running")
	queued := spawn(t, m.Owner("owner-b"), func(context.Context, *bgtask.Task) (any, error) {
		t.Error("a task queued at Shutdown ran")
		return nil, nil
	}, "queued")
	if st := get(t, s, queued).Status; st != bgtype.StatusQueued {
		t.Fatalf("second task: %s, want queued", st)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if cause := <-causes; cause != bgtask.ErrShutdown {
		t.Errorf("context.Cause seen by the task: %v, want ErrShutdown", cause)
	}
	evs := endEvents(t, m, "owner-a")
	maps.Copy(evs, endEvents(t, m, "owner-b"))
	for _, id := range []string{running, queued} {
		got := get(t, s, id)
		if got.Status != bgtype.StatusCanceled || got.Error != bgtask.ErrShutdown.Error() || got.CancelReason != bgtask.ShutdownReason {
			t.Errorf("%s after Shutdown: status %q error %q reason %q, want cancelled %q %q",
				id, got.Status, got.Error, got.CancelReason, bgtask.ErrShutdown.Error(), bgtask.ShutdownReason)
		}
		if ev := evs[id]; ev.Kind != bgtype.EventCanceled || ev.CancelReason != bgtask.ShutdownReason {
			t.Errorf("event of %s: kind %q reason %q, want cancelled %q", id, ev.Kind, ev.CancelReason, bgtask.ShutdownReason)
		}
	}
	if len(evs) != 2 {
		t.Errorf("%d terminal events, want 2", len(evs))
	}
}

// testManagerStop: Manager.Stop, the soft stop, refuses spawns, never
// starts the queued task (interrupted at once), lets a running task end on
// its own, and at its context's end cuts the task still running: it ends
// interrupted as after a crash (fenced on a new attempt, KindInterrupted,
// an error saying the process shut down), its late result discarded, with
// one interrupted event; the task saw a cause matching ErrShutdown. Each
// task has an owner of its own, as in testManagerShutdown.
func testManagerStop(t *testing.T, c Config) {
	const inst = "inst-soft"
	m, s := newManager(t, c, inst, 2)
	release := make(chan struct{})
	polite := spawn(t, m.Owner("owner-a"), func(context.Context, *bgtask.Task) (any, error) {
		<-release
		return "finished", nil
	}, "polite")
	causes := make(chan error, 1)
	called := make(chan struct{})
	stubborn := spawn(t, m.Owner("owner-b"), func(ctx context.Context, _ *bgtask.Task) (any, error) {
		close(called)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return "late result", nil // discarded: the record is interrupted
	}, "stubborn")
	queued := spawn(t, m.Owner("owner-c"), func(context.Context, *bgtask.Task) (any, error) {
		t.Error("a task queued at Stop ran")
		return nil, nil
	}, "queued")
	before := get(t, s, stubborn)
	if st := get(t, s, queued).Status; st != bgtype.StatusQueued || before.Status != bgtype.StatusRunning {
		t.Fatalf("before Stop: stubborn %s, queued %s; want running and queued", before.Status, st)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- m.Stop(ctx) }()
	// The queued task ends at once: Stop has begun.
	if got, err := m.Wait(context.Background(), queued); err != nil || got.Status != bgtype.StatusInterrupted {
		t.Fatalf("queued task after Stop began: %q, %v; want interrupted", got.Status, err)
	}
	if _, err := m.Owner("owner-a").Spawn(context.Background(), func(context.Context, *bgtask.Task) (any, error) { return nil, nil }); !errors.Is(err, bgtask.ErrClosed) {
		t.Fatalf("Spawn during Stop: %v, want ErrClosed", err)
	}
	close(release)
	if got, err := m.Wait(context.Background(), polite); err != nil || got.Status != bgtype.StatusCompleted || string(got.Result) != `"finished"` {
		t.Fatalf("polite task: %q %s, %v; want completed \"finished\"", got.Status, got.Result, err)
	}
	select {
	case cause := <-causes:
		t.Fatalf("the running task was cancelled (%v) before Stop's context ended", cause)
	default:
	}
	if got := get(t, s, stubborn); got.Status != bgtype.StatusRunning {
		t.Fatalf("stubborn task before the deadline: %q, want running", got.Status)
	}
	// Its function runs (a task cut before its function is called never
	// calls it, and would send no cause).
	<-called
	cancel() // the deadline
	err := <-stopped
	wantErr := fmt.Sprintf("bgtask: stop: 1 task(s) still running at the deadline were interrupted (%s): context canceled", stubborn)
	se, ok := errors.AsType[*bgtask.ShutdownError](err)
	if !ok || !errors.Is(err, context.Canceled) || err.Error() != wantErr || !slices.Equal(se.Interrupted, []string{stubborn}) {
		t.Fatalf("Stop: %v, want a *ShutdownError %q", err, wantErr)
	}
	if cause := <-causes; !errors.Is(cause, bgtask.ErrShutdown) {
		t.Errorf("context.Cause seen by the cut task: %v, want one matching ErrShutdown", cause)
	}
	wantText := fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) shut down before it ended; it will not be re-run", inst)
	evs := endEvents(t, m, "owner-a")
	maps.Copy(evs, endEvents(t, m, "owner-b"))
	maps.Copy(evs, endEvents(t, m, "owner-c"))
	for _, id := range []string{queued, stubborn} {
		got := get(t, s, id)
		if got.Status != bgtype.StatusInterrupted || got.ErrorKind != bgtype.KindInterrupted || got.Error != wantText ||
			got.Result != nil || got.CancelReason != "" || got.FinishedAt.IsZero() {
			t.Errorf("%s after Stop: %+v, want interrupted (%s) %q without a result", id, got, bgtype.KindInterrupted, wantText)
		}
		if ev := evs[id]; ev.Kind != bgtype.EventInterrupted || ev.Error != wantText || ev.ErrorKind != bgtype.KindInterrupted {
			t.Errorf("event of %s: %+v, want interrupted %q", id, ev, wantText)
		}
	}
	if got := get(t, s, stubborn); got.Attempt != before.Attempt+1 {
		t.Errorf("stubborn task's attempt %d after Stop, want %d (fenced as a recovery fences)", got.Attempt, before.Attempt+1)
	}
	if ev := evs[polite]; ev.Kind != bgtype.EventCompleted {
		t.Errorf("event of the polite task: %+v, want completed", ev)
	}
	if len(evs) != 3 {
		t.Errorf("%d terminal events, want 3", len(evs))
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after Stop: %v", err)
	}
}
