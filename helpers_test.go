package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/bgtask/bgtask/internal/rectest"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Test helpers shared by every test file of the package.

// newTestManager returns a Manager that is shut down (and checked) when the test ends,
// in case the test stops early. Tests still call shutdownManager at their end.
func newTestManager(t testing.TB, opts ...Option) *Manager {
	t.Helper()
	m, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		// No deadline: a Shutdown that hangs is a bug the test binary's
		// -timeout reports with every stack, not a race against the clock.
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown in cleanup: %v", err)
		}
	})
	return m
}

// shutdownManager shuts m down and fails the test unless Shutdown returns nil.
func shutdownManager(t testing.TB, m *Manager) {
	t.Helper()
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// countingStore counts successful commits, to prove a refused spawn
// persisted nothing.
type countingStore struct {
	store.Store
	commits atomic.Int64
}

func (s *countingStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	err := s.Store.Commit(ctx, owner, actions...)
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

// probeTask is a task body that reports it started, hands out its context and
// task, then blocks until its context is cancelled (or release is closed), and
// reports the cancellation cause.
type probeTask struct {
	started chan struct{}
	release chan struct{}
	cause   chan error // buffered: the cause seen when ctx ended, nil if released
	ctx     context.Context
	task    *Task
}

func newProbe() *probeTask {
	return &probeTask{started: make(chan struct{}), release: make(chan struct{}), cause: make(chan error, 1)}
}

func (p *probeTask) fn(ctx context.Context, tk *Task) (any, error) {
	p.ctx, p.task = ctx, tk
	close(p.started)
	select {
	case <-ctx.Done():
		p.cause <- context.Cause(ctx)
		return nil, ctx.Err()
	case <-p.release:
		p.cause <- nil
		return "released", nil
	}
}

// ctxErr returns the probe's context error once it started (safe: ctx is
// written before started is closed).
func (p *probeTask) ctxErr(t testing.TB) error {
	t.Helper()
	<-p.started
	return p.ctx.Err()
}

// spawnProbe spawns a probe and waits until its function runs.
func spawnProbe(t testing.TB, ctx context.Context, o Owner, opts ...SpawnOption) (string, *probeTask) {
	t.Helper()
	p := newProbe()
	id, err := o.Spawn(ctx, p.fn, opts...)
	if err != nil {
		t.Fatalf("Spawn probe: %v", err)
	}
	<-p.started
	return id, p
}

// listTasks collects an owner's List.
func listTasks(t testing.TB, o Owner, statuses ...bgtype.Status) []bgtype.TaskMeta {
	t.Helper()
	var metas []bgtype.TaskMeta
	for meta, err := range o.List(context.Background(), statuses...) {
		if err != nil {
			t.Fatalf("List(%s, %v): %v", o.ID(), statuses, err)
		}
		metas = append(metas, meta)
	}
	return metas
}

// listErr returns the first error a listing yields, nil if none.
func listErr(seq iter.Seq2[bgtype.TaskMeta, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

func taskIDs(metas []bgtype.TaskMeta) []string {
	ids := make([]string, len(metas))
	for i, m := range metas {
		ids[i] = m.ID
	}
	return ids
}

// drainOwner drains the owner's inbox.
func drainOwner(t testing.TB, o Owner) []bgtype.Event {
	t.Helper()
	ib, err := o.Inbox()
	if err != nil {
		t.Fatalf("Inbox(%s): %v", o.ID(), err)
	}
	return ib.Drain()
}

func eventKinds(evs []bgtype.Event) []bgtype.EventKind {
	ks := make([]bgtype.EventKind, len(evs))
	for i, e := range evs {
		ks[i] = e.Kind
	}
	return ks
}

// getter and waiter are what a Manager and an Owner view have in common, so
// one helper reads or waits through either.
type (
	getter interface {
		Get(ctx context.Context, id string) (bgtype.TaskMeta, error)
	}
	waiter interface {
		Wait(ctx context.Context, id string) (bgtype.TaskMeta, error)
	}
)

// spawnFor spawns fn for owner or fails the test.
func spawnFor(t testing.TB, m *Manager, owner string, fn Func, opts ...SpawnOption) string {
	t.Helper()
	id, err := m.Owner(owner).Spawn(context.Background(), fn, opts...)
	if err != nil {
		t.Fatalf("Spawn for %q: %v", owner, err)
	}
	return id
}

// getTask reads the record of id through g (a Manager or an Owner view)
// or fails the test.
func getTask(t testing.TB, g getter, id string) bgtype.TaskMeta {
	t.Helper()
	meta, err := g.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return meta
}

// waitTask waits for id through w (a Manager or an Owner view) and fails
// the test on error, except the *TaskError of a failed task, which must
// say what its record says.
func waitTask(t testing.TB, w waiter, id string) bgtype.TaskMeta {
	t.Helper()
	meta, err := w.Wait(context.Background(), id)
	if te, ok := errors.AsType[*TaskError](err); ok && meta.Status == bgtype.StatusFailed {
		if *te != (TaskError{TaskID: id, Kind: meta.ErrorKind, Message: meta.Error}) || meta.ErrorKind == "" {
			t.Fatalf("Wait(%s): %#v for the record %+v", id, te, meta)
		}
		return meta
	}
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	if meta.Status == bgtype.StatusFailed {
		t.Fatalf("Wait(%s): no error for a failed task", id)
	}
	return meta
}

// isTaskError reports whether err is a failed task's *TaskError.
func isTaskError(err error) bool {
	_, ok := errors.AsType[*TaskError](err)
	return ok
}

// waitStatus waits for id and checks its terminal status.
func waitStatus(t testing.TB, w waiter, id string, want bgtype.Status) bgtype.TaskMeta {
	t.Helper()
	meta := waitTask(t, w, id)
	if meta.Status != want {
		t.Fatalf("Wait(%s): status %q (error %q), want %q", id, meta.Status, meta.Error, want)
	}
	return meta
}

// countRecords returns how many records the store keeps for owner.
func countRecords(t testing.TB, m *Manager, owner string) int {
	t.Helper()
	snap, err := m.Store().Load(context.Background(), owner)
	if err != nil {
		t.Fatalf("Load(%q): %v", owner, err)
	}
	return len(snap.Tasks)
}

// kindID is an event reduced to what the tests compare.
type kindID struct {
	Kind bgtype.EventKind
	ID   string
}

// drainKindIDs drains owner's inbox, keeping each event's kind and task id.
func drainKindIDs(t testing.TB, m *Manager, owner string) []kindID {
	t.Helper()
	var out []kindID
	for _, ev := range drainOwner(t, m.Owner(owner)) {
		out = append(out, kindID{ev.Kind, ev.TaskID})
	}
	return out
}

func panickingTask(ctx context.Context, tk *Task) (any, error) {
	panic("boom")
}

// receiverTask is a sub-agent body that waits for n events in its own inbox
// and returns them; it fails if the inbox closes or ctx ends first.
func receiverTask(n int, got chan<- []bgtype.Event) Func {
	return func(ctx context.Context, tk *Task) (any, error) {
		ib := tk.Inbox()
		if ib == nil {
			return nil, errors.New("sub-agent without inbox")
		}
		var evs []bgtype.Event
		for len(evs) < n {
			if err := ib.Wait(ctx); err != nil {
				return nil, err
			}
			evs = ib.AppendDrain(evs)
		}
		got <- evs
		return len(evs), nil
	}
}

func spawnReceiver(t testing.TB, o Owner, n int, opts ...SpawnOption) (string, <-chan []bgtype.Event, *Task) {
	t.Helper()
	got := make(chan []bgtype.Event, 1)
	handle := make(chan *Task, 1)
	recv := receiverTask(n, got)
	id, err := o.SpawnAgent(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handle <- tk
		return recv(ctx, tk)
	}, opts...)
	if err != nil {
		t.Fatalf("SpawnAgent: %v", err)
	}
	return id, got, <-handle
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The shared record builders (internal/rectest), under this package's names.
var (
	rt0, rt1, rt2, rt3 = rectest.T0, rectest.T1, rectest.T2, rectest.T3
	rmeta              = rectest.Meta
	with               = rectest.With
	snapOf             = rectest.SnapOf
	fullMeta           = rectest.Full
)
