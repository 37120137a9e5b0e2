package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// ---- helpers shared by manager_test.go, lineage_test.go, cancel_test.go and
// send_test.go. Names start with "mt" so they do not clash with other files.

// mtNew returns a Manager that is shut down (and checked) when the test ends,
// in case the test stops early. Tests still call mtShutdown at their end.
func mtNew(t testing.TB, opts ...Option) *Manager {
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

// mtShutdown shuts m down and fails the test unless Shutdown returns nil.
func mtShutdown(t testing.TB, m *Manager) {
	t.Helper()
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// mtCountingStore counts successful commits, to prove a refused spawn
// persisted nothing.
type mtCountingStore struct {
	Store
	commits atomic.Int64
}

func (s *mtCountingStore) Commit(ctx context.Context, owner string, actions ...Action) error {
	err := s.Store.Commit(ctx, owner, actions...)
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

// mtProbe is a task body that reports it started, hands out its context and
// task, then blocks until its context is cancelled (or release is closed), and
// reports the cancellation cause.
type mtProbe struct {
	started chan struct{}
	release chan struct{}
	cause   chan error // buffered: the cause seen when ctx ended, nil if released
	ctx     context.Context
	task    *Task
}

func newProbe() *mtProbe {
	return &mtProbe{started: make(chan struct{}), release: make(chan struct{}), cause: make(chan error, 1)}
}

func (p *mtProbe) fn(ctx context.Context, tk *Task) (any, error) {
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
func (p *mtProbe) ctxErr(t testing.TB) error {
	t.Helper()
	<-p.started
	return p.ctx.Err()
}

// mtSpawnProbe spawns a probe and waits until its function runs.
func mtSpawnProbe(t testing.TB, ctx context.Context, o Owner, opts ...SpawnOption) (string, *mtProbe) {
	t.Helper()
	p := newProbe()
	id, err := o.Spawn(ctx, p.fn, opts...)
	if err != nil {
		t.Fatalf("Spawn probe: %v", err)
	}
	<-p.started
	return id, p
}

// mtWait waits for a task of o and fails the test on error.
func mtWait(t testing.TB, o Owner, id string) TaskMeta {
	t.Helper()
	meta, err := o.Wait(context.Background(), id)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	return meta
}

// mtList collects an owner's List.
func mtList(t testing.TB, o Owner, statuses ...TaskStatus) []TaskMeta {
	t.Helper()
	seq, err := o.List(context.Background(), statuses...)
	if err != nil {
		t.Fatalf("List(%s, %v): %v", o.ID(), statuses, err)
	}
	return slices.Collect(seq)
}

func mtIDs(metas []TaskMeta) []string {
	ids := make([]string, len(metas))
	for i, m := range metas {
		ids[i] = m.ID
	}
	return ids
}

// mtDrain drains the owner's inbox.
func mtDrain(t testing.TB, o Owner) []Event {
	t.Helper()
	ib, err := o.Inbox()
	if err != nil {
		t.Fatalf("Inbox(%s): %v", o.ID(), err)
	}
	return ib.Drain()
}

func mtKinds(evs []Event) []EventKind {
	ks := make([]EventKind, len(evs))
	for i, e := range evs {
		ks[i] = e.Kind
	}
	return ks
}

// ---- lifecycle

func mtPanickingTask(ctx context.Context, tk *Task) (any, error) {
	panic("boom")
}

func TestManagerLifecycle(t *testing.T) {
	errCleanup := errors.New("cleanup failed")
	cases := []struct {
		name       string
		cancel     bool // cancel the task once it runs, then let it return
		fn         func(ctx context.Context) (any, error)
		want       TaskStatus
		wantError  string // exact, unless wantPrefix
		wantPrefix bool
		wantResult string
	}{
		{name: "completed with JSON result",
			fn: func(context.Context) (any, error) {
				return map[string]any{"key": "value", "nested": []int{1, 2, 3}}, nil
			},
			want: StatusCompleted, wantResult: `{"key":"value","nested":[1,2,3]}`},
		{name: "completed with nil result",
			fn:   func(context.Context) (any, error) { return nil, nil },
			want: StatusCompleted, wantResult: `null`},
		{name: "completed with raw JSON",
			fn:   func(context.Context) (any, error) { return json.RawMessage(`{"score":3.125}`), nil },
			want: StatusCompleted, wantResult: `{"score":3.125}`},
		{name: "failed with error text",
			fn:   func(context.Context) (any, error) { return nil, errors.New("oops") },
			want: StatusFailed, wantError: "oops"},
		{name: "failed with value and error keeps no result",
			fn:   func(context.Context) (any, error) { return "partial", errors.New("disk full") },
			want: StatusFailed, wantError: "disk full"},
		{name: "context.Canceled without a cancel is a failure",
			fn: func(context.Context) (any, error) {
				return nil, fmt.Errorf("inner call: %w", context.Canceled)
			},
			want: StatusFailed, wantError: "inner call: context canceled"},
		{name: "cancelled returning ctx.Err", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, ctx.Err() },
			want: StatusCancelled, wantError: ErrCancelled.Error()},
		{name: "cancelled returning context.Cause", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, context.Cause(ctx) },
			want: StatusCancelled, wantError: ErrCancelled.Error()},
		{name: "cancelled returning a wrapped ctx.Err", cancel: true,
			fn: func(ctx context.Context) (any, error) {
				return nil, fmt.Errorf("stopping: %w", ctx.Err())
			},
			want: StatusCancelled, wantError: ErrCancelled.Error()},
		{name: "cancel asks, does not force: value after cancel completes", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return "done anyway", nil },
			want: StatusCompleted, wantResult: `"done anyway"`},
		{name: "other error after cancel fails", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, errCleanup },
			want: StatusFailed, wantError: "cleanup failed"},
		{name: "unencodable result fails",
			fn:   func(context.Context) (any, error) { return make(chan int), nil },
			want: StatusFailed, wantError: "bgtask: result is not JSON-encodable: ", wantPrefix: true},
		{name: "runtime.Goexit fails",
			fn: func(context.Context) (any, error) {
				runtime.Goexit()
				return nil, nil
			},
			want: StatusFailed, wantError: "bgtask: task function called runtime.Goexit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mtNew(t)
			o := m.Owner("thread-1")
			running, proceed := make(chan struct{}), make(chan struct{})
			id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				close(running)
				<-proceed
				if tc.cancel {
					<-ctx.Done()
				}
				return tc.fn(ctx)
			}, WithType("test"), WithDescription("my task"))
			if err != nil {
				t.Fatalf("Spawn: %v", err)
			}
			if !strings.HasPrefix(id, IDPrefix) || len(id) != len(IDPrefix)+32 {
				t.Fatalf("id %q: want %q and 32 hex digits", id, IDPrefix)
			}
			<-running
			meta, err := o.Get(t.Context(), id)
			if err != nil || meta.Status != StatusRunning || meta.StartedAt.IsZero() || !meta.FinishedAt.IsZero() {
				t.Fatalf("while running: Get = %+v, %v; want running with StartedAt and no FinishedAt", meta, err)
			}
			if tc.cancel {
				if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
					t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
				}
			}
			close(proceed)

			got := mtWait(t, o, id)
			if got.Status != tc.want {
				t.Fatalf("status %q, want %q (error %q)", got.Status, tc.want, got.Error)
			}
			if tc.wantPrefix {
				if !strings.HasPrefix(got.Error, tc.wantError) {
					t.Fatalf("error %q, want prefix %q", got.Error, tc.wantError)
				}
			} else if got.Error != tc.wantError {
				t.Fatalf("error %q, want %q", got.Error, tc.wantError)
			}
			if string(got.Result) != tc.wantResult {
				t.Fatalf("result %s, want %s", got.Result, tc.wantResult)
			}
			if got.Stack != "" {
				t.Fatalf("stack set without a panic: %q", got.Stack)
			}
			if got.ID != id || got.Owner != "thread-1" || got.Type != "test" || got.Description != "my task" || got.Instance != m.Instance() {
				t.Fatalf("identity fields wrong: %+v", got)
			}
			if got.CreatedAt.IsZero() || got.StartedAt.IsZero() || got.FinishedAt.IsZero() ||
				got.StartedAt.Before(got.CreatedAt) || got.FinishedAt.Before(got.StartedAt) {
				t.Fatalf("stamps created %v started %v finished %v", got.CreatedAt, got.StartedAt, got.FinishedAt)
			}
			stored, err := m.Get(t.Context(), id)
			if err != nil {
				t.Fatalf("Manager.Get: %v", err)
			}
			if stored.Status != got.Status || stored.Error != got.Error || string(stored.Result) != string(got.Result) ||
				!stored.FinishedAt.Equal(got.FinishedAt) || !stored.StartedAt.Equal(got.StartedAt) || !stored.CreatedAt.Equal(got.CreatedAt) {
				t.Fatalf("stored record %+v differs from Wait's %+v", stored, got)
			}

			evs := mtDrain(t, o)
			if len(evs) != 1 {
				t.Fatalf("events %v, want exactly the terminal one", evs)
			}
			ev := evs[0]
			if ev.Kind != EventKind(tc.want) || ev.TaskID != id {
				t.Fatalf("event %+v, want kind %q for %s", ev, tc.want, id)
			}
			switch tc.want {
			case StatusCompleted:
				if string(ev.Result) != tc.wantResult {
					t.Fatalf("event result %s, want %s", ev.Result, tc.wantResult)
				}
			case StatusFailed:
				if ev.Error != got.Error {
					t.Fatalf("event error %q, want %q", ev.Error, got.Error)
				}
			}
			mtShutdown(t, m)
		})
	}
}

func TestManagerPanicFails(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), mtPanickingTask)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	got := mtWait(t, o, id)
	if got.Status != StatusFailed || got.Error != "panic: boom" {
		t.Fatalf("got status %q error %q, want failed %q", got.Status, got.Error, "panic: boom")
	}
	if !strings.Contains(got.Stack, "mtPanickingTask") {
		t.Fatalf("stack does not name the function:\n%s", got.Stack)
	}
	stored, err := o.Get(t.Context(), id)
	if err != nil || stored.Stack != got.Stack || stored.Status != StatusFailed || stored.FinishedAt.IsZero() {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	evs := mtDrain(t, o)
	if len(evs) != 1 || evs[0].Kind != EventFailed || evs[0].Error != "panic: boom" || evs[0].TaskID != id {
		t.Fatalf("events %+v, want one failed event with %q", evs, "panic: boom")
	}
	// The manager goes on.
	id2, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return 1, nil })
	if err != nil {
		t.Fatalf("Spawn after panic: %v", err)
	}
	if got := mtWait(t, o, id2); got.Status != StatusCompleted || string(got.Result) != "1" {
		t.Fatalf("after panic: %+v", got)
	}
	mtShutdown(t, m)
}

// TestManagerCommitThenNotify: whoever drains a terminal event can Get the
// terminal record at once (D5).
func TestManagerCommitThenNotify(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	want := map[string]TaskStatus{}
	for i := range n {
		fn := func(context.Context, *Task) (any, error) { return i, nil }
		st := StatusCompleted
		if i%3 == 0 {
			fn = func(context.Context, *Task) (any, error) { return nil, fmt.Errorf("fail %d", i) }
			st = StatusFailed
		}
		id, err := o.Spawn(t.Context(), fn)
		if err != nil {
			t.Fatalf("Spawn %d: %v", i, err)
		}
		want[id] = st
	}
	seen := 0
	for seen < n {
		if err := ib.Wait(t.Context()); err != nil {
			t.Fatalf("inbox Wait: %v", err)
		}
		for _, ev := range ib.Drain() {
			if !ev.Kind.IsTerminal() {
				t.Fatalf("unexpected event %+v", ev)
			}
			meta, err := m.Get(t.Context(), ev.TaskID)
			if err != nil {
				t.Fatalf("Get(%s) after its event: %v", ev.TaskID, err)
			}
			if meta.Status != want[ev.TaskID] || EventKind(meta.Status) != ev.Kind || meta.FinishedAt.IsZero() {
				t.Fatalf("Get(%s) after event %q: status %q finished %v, want %q", ev.TaskID, ev.Kind, meta.Status, meta.FinishedAt, want[ev.TaskID])
			}
			delete(want, ev.TaskID)
			seen++
		}
	}
	if len(want) != 0 {
		t.Fatalf("no event for %v", want)
	}
	mtShutdown(t, m)
}

// ---- spawn validation

func TestManagerSpawnRefused(t *testing.T) {
	type setupFn func(t *testing.T, m *Manager) (o Owner, ctx context.Context, opts []SpawnOption)
	plain := func(owner string, opts ...SpawnOption) setupFn {
		return func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
			return m.Owner(owner), t.Context(), opts
		}
	}
	cases := []struct {
		name  string
		setup setupFn
		nilFn bool
		want  error
	}{
		{name: "empty owner", setup: plain(""), want: ErrInvalidOwner},
		{name: "blank owner", setup: plain(" \t\n"), want: ErrInvalidOwner},
		{name: "nil func", setup: plain("thread-1"), nilFn: true, want: ErrInvalidArgument},
		{name: "reserved parent", setup: plain("thread-1", WithName("parent")), want: ErrInvalidArgument},
		{name: "reserved self", setup: plain("thread-1", WithName("self")), want: ErrInvalidArgument},
		{name: "reserved all", setup: plain("thread-1", WithName("all")), want: ErrInvalidArgument},
		{name: "reserved broadcast", setup: plain("thread-1", WithName("broadcast")), want: ErrInvalidArgument},
		{name: "blank name", setup: plain("thread-1", WithName("   ")), want: ErrInvalidArgument},
		{name: "leading space", setup: plain("thread-1", WithName(" worker")), want: ErrInvalidArgument},
		{name: "trailing space", setup: plain("thread-1", WithName("worker ")), want: ErrInvalidArgument},
		{name: "id prefix", setup: plain("thread-1", WithName("task_0123")), want: ErrInvalidArgument},
		{name: "control char", setup: plain("thread-1", WithName("a\x00b")), want: ErrInvalidArgument},
		{name: "newline", setup: plain("thread-1", WithName("a\nb")), want: ErrInvalidArgument},
		{name: "too long", setup: plain("thread-1", WithName(strings.Repeat("a", 129))), want: ErrInvalidArgument},
		{name: "duplicate name", want: ErrDuplicateName,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o := m.Owner("thread-1")
				mtSpawnProbe(t, t.Context(), o, WithName("researcher"))
				return o, t.Context(), []SpawnOption{WithName("researcher")}
			}},
		{name: "duplicate name of a sub-agent", want: ErrDuplicateName,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o := m.Owner("thread-1")
				p := newProbe()
				if _, err := o.SpawnAgent(t.Context(), p.fn, WithName("researcher")); err != nil {
					t.Fatal(err)
				}
				<-p.started
				return o, t.Context(), []SpawnOption{WithName("researcher")}
			}},
		{name: "unknown parent", setup: plain("thread-1", WithParent(Parent{TaskID: "task_00000000000000000000000000000000"})), want: ErrParentNotFound},
		{name: "live parent of another owner", want: ErrParentNotFound,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				pid, _ := mtSpawnProbe(t, t.Context(), m.Owner("thread-2"))
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(Parent{TaskID: pid})}
			}},
		{name: "ended parent of another owner", want: ErrParentNotFound,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o2 := m.Owner("thread-2")
				pid, err := o2.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil })
				if err != nil {
					t.Fatal(err)
				}
				mtWait(t, o2, pid)
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(Parent{TaskID: pid})}
			}},
		{name: "cancelled run, explicit parent", want: ErrRunCancelled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if n, err := m.CancelRun("thread-1", "run-cancelled"); n != 0 || err != nil {
					t.Fatalf("CancelRun = %d, %v", n, err)
				}
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(Parent{RunID: "run-cancelled"})}
			}},
		{name: "cancelled run, ambient tool call", want: ErrRunCancelled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if _, err := m.CancelRun("thread-1", "run-cancelled"); err != nil {
					t.Fatal(err)
				}
				return m.Owner("thread-1"), WithToolCall(t.Context(), ToolCall{RunID: "run-cancelled", CallID: "c1"}), nil
			}},
		{name: "cancelled run, detached", want: ErrRunCancelled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if _, err := m.CancelRun("thread-1", "run-cancelled"); err != nil {
					t.Fatal(err)
				}
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(Parent{RunID: "run-cancelled"}), WithDetached()}
			}},
		{name: "spawn context already cancelled", want: context.Canceled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return m.Owner("thread-1"), ctx, []SpawnOption{WithName("worker")}
			}},
		{name: "closed manager", want: ErrClosed,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				mtShutdown(t, m)
				return m.Owner("thread-1"), t.Context(), nil
			}},
	}
	for _, tc := range cases {
		for _, agent := range []bool{false, true} {
			name := tc.name + "/Spawn"
			if agent {
				name = tc.name + "/SpawnAgent"
			}
			t.Run(name, func(t *testing.T) {
				store := &mtCountingStore{Store: NewMemoryStore()}
				m := mtNew(t, WithStore(store))
				o, ctx, opts := tc.setup(t, m)
				var before []string
				if validOwner(o.ID()) {
					before = mtIDs(mtList(t, o))
				}
				commits := store.commits.Load()
				var ran atomic.Bool
				fn := Func(func(context.Context, *Task) (any, error) { ran.Store(true); return nil, nil })
				if tc.nilFn {
					fn = nil
				}
				spawn := o.Spawn
				if agent {
					spawn = o.SpawnAgent
				}
				id, err := spawn(ctx, fn, opts...)
				if !errors.Is(err, tc.want) || id != "" {
					t.Fatalf("Spawn = %q, %v; want \"\", %v", id, err, tc.want)
				}
				if got := store.commits.Load(); got != commits {
					t.Fatalf("refused spawn committed %d time(s)", got-commits)
				}
				if validOwner(o.ID()) {
					if after := mtIDs(mtList(t, o)); !slices.Equal(after, before) {
						t.Fatalf("owner's tasks %v after a refused spawn, want %v", after, before)
					}
				}
				mtShutdown(t, m)
				if ran.Load() {
					t.Fatal("the function of a refused spawn ran")
				}
			})
		}
	}
}

func TestManagerSpawnNameEdges(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	for _, name := range []string{strings.Repeat("a", 128), "researcher", "Parent", "my task", "tâche", "task-1"} {
		id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithName(name))
		if err != nil {
			t.Fatalf("Spawn(name %q): %v", name, err)
		}
		if got := mtWait(t, o, id); got.Name != name {
			t.Fatalf("name %q, want %q", got.Name, name)
		}
	}
	mtShutdown(t, m)
}

func TestManagerNameReuse(t *testing.T) {
	m := mtNew(t)
	o1, o2 := m.Owner("thread-1"), m.Owner("thread-2")
	id1, p1 := mtSpawnProbe(t, t.Context(), o1, WithName("researcher"))
	// Same name on another owner: allowed.
	id2, _ := mtSpawnProbe(t, t.Context(), o2, WithName("researcher"))
	if id1 == id2 {
		t.Fatal("two tasks share an id")
	}
	if _, err := o1.Spawn(t.Context(), newProbe().fn, WithName("researcher")); !errors.Is(err, ErrDuplicateName) {
		t.Fatalf("duplicate on thread-1: %v, want ErrDuplicateName", err)
	}
	// Once the first ends, the name is free again.
	close(p1.release)
	if got := mtWait(t, o1, id1); got.Status != StatusCompleted {
		t.Fatalf("first researcher: %+v", got)
	}
	id3, err := o1.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "again", nil }, WithName("researcher"))
	if err != nil {
		t.Fatalf("Spawn after the first ended: %v", err)
	}
	if id3 == id1 {
		t.Fatal("reused id")
	}
	if got := mtWait(t, o1, id3); got.Name != "researcher" || got.Status != StatusCompleted {
		t.Fatalf("second researcher: %+v", got)
	}
	// Also free after a cancel ends the holder.
	id4, _ := mtSpawnProbe(t, t.Context(), o1, WithName("writer"))
	if n, err := o1.Cancel(t.Context(), id4); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	mtWait(t, o1, id4)
	if _, err := o1.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithName("writer")); err != nil {
		t.Fatalf("Spawn writer after cancel: %v", err)
	}
	mtShutdown(t, m)
}

func TestManagerConcurrentSpawnSameName(t *testing.T) {
	const n = 32
	store := &mtCountingStore{Store: NewMemoryStore()}
	m := mtNew(t, WithStore(store))
	o := m.Owner("thread-1")
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		ids       = make([]string, n)
		errs      = make([]error, n)
		ran       atomic.Int64
		releaseFn = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ids[i], errs[i] = o.Spawn(context.Background(), func(ctx context.Context, _ *Task) (any, error) {
				ran.Add(1)
				select {
				case <-releaseFn:
				case <-ctx.Done():
				}
				return nil, nil
			}, WithName("researcher"))
		})
	}
	close(start)
	wg.Wait()
	won := ""
	for i := range n {
		switch {
		case errs[i] == nil:
			if won != "" {
				t.Fatalf("two spawns won: %s and %s", won, ids[i])
			}
			won = ids[i]
		case !errors.Is(errs[i], ErrDuplicateName) || ids[i] != "":
			t.Fatalf("spawn %d: %q, %v; want ErrDuplicateName", i, ids[i], errs[i])
		}
	}
	if won == "" {
		t.Fatal("no spawn won")
	}
	if got := mtIDs(mtList(t, o)); !slices.Equal(got, []string{won}) {
		t.Fatalf("List = %v, want [%s]", got, won)
	}
	if c := store.commits.Load(); c != 1 {
		t.Fatalf("%d commits, want 1", c)
	}
	close(releaseFn)
	mtWait(t, o, won)
	mtShutdown(t, m)
	if r := ran.Load(); r != 1 {
		t.Fatalf("%d functions ran, want 1", r)
	}
}

// ---- owner views and listing

func TestManagerOwnerViewsHideOtherOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mtNew(t)
		a, b := m.Owner("thread-A"), m.Owner("thread-B")
		liveID, probe := mtSpawnProbe(t, t.Context(), b, WithName("worker"))
		agentProbe := newProbe()
		agentID, err := b.SpawnAgent(t.Context(), agentProbe.fn)
		if err != nil {
			t.Fatal(err)
		}
		<-agentProbe.started
		doneID, err := b.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "secret", nil })
		if err != nil {
			t.Fatal(err)
		}
		mtWait(t, b, doneID)

		for _, id := range []string{liveID, agentID, doneID} {
			if _, err := a.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%s) from another owner: %v, want ErrNotFound", id, err)
			}
			if n, err := a.Cancel(t.Context(), id); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Errorf("Cancel(%s) from another owner: %d, %v; want 0, ErrNotFound", id, n, err)
			}
			if n, err := a.CancelTree(t.Context(), id); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Errorf("CancelTree(%s) from another owner: %d, %v; want 0, ErrNotFound", id, n, err)
			}
			if _, err := a.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Wait(%s) from another owner: %v, want ErrNotFound", id, err)
			}
			err := a.Send(t.Context(), id, Message{From: "intruder", Content: "hi"})
			if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotOwner) || errors.Is(err, ErrTerminal) {
				t.Errorf("Send(%s) from another owner: %v, want only ErrNotFound", id, err)
			}
		}
		if got := mtList(t, a); len(got) != 0 {
			t.Fatalf("thread-A lists %v", mtIDs(got))
		}
		// Nothing reached B's tasks.
		synctest.Wait()
		if probe.ctxErr(t) != nil || agentProbe.ctxErr(t) != nil {
			t.Fatal("another owner's cancel reached the tasks")
		}
		if n := agentProbe.task.Inbox().Len(); n != 0 {
			t.Fatalf("another owner's Send reached the sub-agent: %d event(s)", n)
		}
		if got := mtIDs(mtList(t, b, StatusRunning)); !slices.Equal(got, []string{liveID, agentID}) {
			t.Fatalf("thread-B running = %v", got)
		}
		// The owner itself sees them.
		if got, err := b.Get(t.Context(), doneID); err != nil || string(got.Result) != `"secret"` {
			t.Fatalf("owner Get: %+v, %v", got, err)
		}
		mtShutdown(t, m)
	})
}

func TestManagerUnknownIDs(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	const id = "task_00000000000000000000000000000000"
	if _, err := m.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Manager.Get: %v", err)
	}
	if _, err := o.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Owner.Get: %v", err)
	}
	if _, err := m.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Manager.Wait: %v", err)
	}
	if _, err := o.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Owner.Wait: %v", err)
	}
	if _, err := m.Owner(" ").Get(t.Context(), id); !errors.Is(err, ErrInvalidOwner) {
		t.Errorf("blank owner Get: %v", err)
	}
	if _, err := m.Owner("").List(t.Context()); !errors.Is(err, ErrInvalidOwner) {
		t.Errorf("empty owner List: %v", err)
	}
	if _, err := m.Owner("").Wait(t.Context(), id); !errors.Is(err, ErrInvalidOwner) {
		t.Errorf("empty owner Wait: %v", err)
	}
	mtShutdown(t, m)
}

func TestManagerListOrderAndFilter(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	other := m.Owner("thread-2")
	mtSpawnProbe(t, t.Context(), other)

	var all, running, completed, failed []string
	for i := range 9 {
		var id string
		switch i % 3 {
		case 0:
			id, _ = mtSpawnProbe(t, t.Context(), o)
			running = append(running, id)
		case 1:
			var err error
			id, err = o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return i, nil })
			if err != nil {
				t.Fatal(err)
			}
			mtWait(t, o, id)
			completed = append(completed, id)
		case 2:
			var err error
			id, err = o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, errors.New("x") })
			if err != nil {
				t.Fatal(err)
			}
			mtWait(t, o, id)
			failed = append(failed, id)
		}
		all = append(all, id)
	}
	mergeInOrder := func(sets ...[]string) []string {
		var out []string
		for _, id := range all {
			for _, s := range sets {
				if slices.Contains(s, id) {
					out = append(out, id)
				}
			}
		}
		return out
	}
	cases := []struct {
		statuses []TaskStatus
		want     []string
	}{
		{nil, all},
		{[]TaskStatus{StatusRunning}, running},
		{[]TaskStatus{StatusCompleted}, completed},
		{[]TaskStatus{StatusCompleted, StatusFailed}, mergeInOrder(completed, failed)},
		{[]TaskStatus{StatusFailed, StatusRunning}, mergeInOrder(failed, running)},
		{[]TaskStatus{StatusQueued}, nil},
		{[]TaskStatus{StatusCancelled, StatusInterrupted}, nil},
		{Statuses(), all},
	}
	for _, tc := range cases {
		got := mtList(t, o, tc.statuses...)
		if ids := mtIDs(got); !slices.Equal(ids, tc.want) && (len(ids) != 0 || len(tc.want) != 0) {
			t.Errorf("List(%v) = %v, want %v", tc.statuses, ids, tc.want)
		}
		for _, meta := range got {
			if meta.Owner != "thread-1" {
				t.Errorf("List(%v) leaked %s of %s", tc.statuses, meta.ID, meta.Owner)
			}
		}
	}
	for _, bad := range []TaskStatus{"bogus", "", "Running"} {
		if _, err := o.List(t.Context(), StatusRunning, bad); !errors.Is(err, ErrInvalidStatus) {
			t.Errorf("List(%q) = %v, want ErrInvalidStatus", bad, err)
		}
	}
	mtShutdown(t, m)
}

// TestManagerClosed: after Shutdown, changes are refused with ErrClosed and
// reads keep working.
func TestManagerClosed(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "kept", nil })
	if err != nil {
		t.Fatal(err)
	}
	agentID, p := func() (string, *mtProbe) {
		p := newProbe()
		id, err := o.SpawnAgent(t.Context(), p.fn)
		if err != nil {
			t.Fatal(err)
		}
		<-p.started
		return id, p
	}()
	mtWait(t, o, id)
	mtShutdown(t, m)
	if c := <-p.cause; !errors.Is(c, ErrShutdown) {
		t.Fatalf("cause at shutdown %v, want ErrShutdown", c)
	}
	if got := mtWait(t, o, agentID); got.Status != StatusCancelled {
		t.Fatalf("sub-agent after shutdown: %+v", got)
	}
	if _, err := o.Spawn(t.Context(), newProbe().fn); !errors.Is(err, ErrClosed) {
		t.Errorf("Spawn: %v", err)
	}
	if _, err := o.SpawnAgent(t.Context(), newProbe().fn); !errors.Is(err, ErrClosed) {
		t.Errorf("SpawnAgent: %v", err)
	}
	if _, err := m.Cancel(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("Cancel: %v", err)
	}
	if _, err := m.CancelTree(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelTree: %v", err)
	}
	if _, err := o.Cancel(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("Owner.Cancel: %v", err)
	}
	if _, err := m.Owner("thread-1").CancelAll(); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelAll: %v", err)
	}
	if _, err := o.CancelAll(); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelAll: %v", err)
	}
	if _, err := m.CancelRun("thread-1", "run-1"); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelRun: %v", err)
	}
	if err := m.Send(t.Context(), "thread-1", agentID, Message{Content: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send: %v", err)
	}
	if err := o.Send(t.Context(), agentID, Message{Content: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Owner.Send: %v", err)
	}
	// Reads still work.
	if got, err := o.Get(t.Context(), id); err != nil || string(got.Result) != `"kept"` {
		t.Errorf("Get after shutdown: %+v, %v", got, err)
	}
	if got := mtIDs(mtList(t, o)); !slices.Equal(got, []string{id, agentID}) {
		t.Errorf("List after shutdown: %v", got)
	}
	if got, err := m.Wait(t.Context(), id); err != nil || got.Status != StatusCompleted {
		t.Errorf("Wait after shutdown: %+v, %v", got, err)
	}
	evs := mtDrain(t, o)
	if ks := mtKinds(evs); !slices.Equal(ks, []EventKind{EventCompleted, EventCancelled}) {
		t.Errorf("events after shutdown: %v", ks)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestManagerWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mtNew(t)
		o := m.Owner("thread-1")
		id, p := mtSpawnProbe(t, t.Context(), o)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := o.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("Wait = %v after %v; want DeadlineExceeded after 5s", err, time.Since(start))
		}
		if _, err := m.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Manager.Wait with an ended ctx: %v", err)
		}
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("a Wait timeout cancelled the task: %v", err)
		}
		close(p.release)
		if got := mtWait(t, o, id); got.Status != StatusCompleted || string(got.Result) != `"released"` {
			t.Fatalf("after release: %+v", got)
		}
		mtShutdown(t, m)
	})
}

// ---- events

func TestManagerEventsRapidEmits(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	const n = 100
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		for i := range n {
			if err := tk.Emit("tick", map[string]int{"i": i}); err != nil {
				return nil, err
			}
		}
		return map[string]string{"final": "answer"}, nil
	}, WithWake(WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	got := mtWait(t, o, id)
	if got.Status != StatusCompleted || string(got.Result) != `{"final":"answer"}` {
		t.Fatalf("events changed the result: %+v", got)
	}
	evs := mtDrain(t, o)
	if len(evs) != n+1 {
		t.Fatalf("%d events, want %d", len(evs), n+1)
	}
	for i, ev := range evs[:n] {
		want := fmt.Sprintf(`{"i":%d}`, i)
		if ev.Kind != EventCustom || ev.EventType != "tick" || ev.TaskID != id || string(ev.Payload) != want {
			t.Fatalf("event %d = %+v (payload %s), want tick %s", i, ev, ev.Payload, want)
		}
	}
	last := evs[n]
	if last.Kind != EventCompleted || last.TaskID != id || string(last.Result) != `{"final":"answer"}` {
		t.Fatalf("last event %+v", last)
	}
	if evs := mtDrain(t, o); len(evs) != 0 {
		t.Fatalf("second drain: %v", evs)
	}
	mtShutdown(t, m)
}

func TestManagerEventsManyTasksShareInbox(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	const tasks, emits = 8, 20
	start := make(chan struct{})
	ids := map[string]int{}
	for k := range tasks {
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			<-start
			for i := range emits {
				if err := tk.Emit("step", []int{k, i}); err != nil {
					return nil, err
				}
			}
			if k%2 == 1 {
				return nil, fmt.Errorf("task %d failed", k)
			}
			return k, nil
		}, WithWake(WakeOnActivity))
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = k
	}
	close(start)
	for id := range ids {
		mtWait(t, o, id)
	}
	next := map[string]int{}
	ended := map[string]bool{}
	evs := mtDrain(t, o)
	if len(evs) != tasks*(emits+1) {
		t.Fatalf("%d events, want %d", len(evs), tasks*(emits+1))
	}
	for _, ev := range evs {
		k, ok := ids[ev.TaskID]
		if !ok {
			t.Fatalf("event for unknown task %q", ev.TaskID)
		}
		if ended[ev.TaskID] {
			t.Fatalf("event %+v after the terminal event of its task", ev)
		}
		switch ev.Kind {
		case EventCustom:
			want := fmt.Sprintf("[%d,%d]", k, next[ev.TaskID])
			if string(ev.Payload) != want {
				t.Fatalf("task %d: payload %s, want %s", k, ev.Payload, want)
			}
			next[ev.TaskID]++
		case EventCompleted, EventFailed:
			if next[ev.TaskID] != emits {
				t.Fatalf("task %d: terminal after %d custom events, want %d", k, next[ev.TaskID], emits)
			}
			wantKind := EventCompleted
			if k%2 == 1 {
				wantKind = EventFailed
			}
			if ev.Kind != wantKind {
				t.Fatalf("task %d: %q, want %q", k, ev.Kind, wantKind)
			}
			ended[ev.TaskID] = true
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if len(ended) != tasks {
		t.Fatalf("%d terminal events, want %d", len(ended), tasks)
	}
	mtShutdown(t, m)
}

func TestManagerEmitErrors(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	type result struct {
		empty, fn, ch, ok error
	}
	res := make(chan result, 1)
	handle := make(chan *Task, 1)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handle <- tk
		payload := map[string]int{"n": 1}
		r := result{
			empty: tk.Emit("", 1),
			fn:    tk.Emit("bad", func() {}),
			ch:    tk.Emit("bad", map[string]any{"c": make(chan int)}),
			ok:    tk.Emit("good", payload),
		}
		payload["n"] = 2 // encoded at Emit: the event keeps 1
		res <- r
		return nil, nil
	}, WithWake(WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !errors.Is(r.empty, ErrInvalidArgument) {
		t.Errorf("Emit(\"\") = %v, want ErrInvalidArgument", r.empty)
	}
	if !errors.Is(r.fn, ErrInvalidArgument) {
		t.Errorf("Emit(func) = %v, want ErrInvalidArgument", r.fn)
	}
	if !errors.Is(r.ch, ErrInvalidArgument) {
		t.Errorf("Emit(chan) = %v, want ErrInvalidArgument", r.ch)
	}
	if r.ok != nil {
		t.Errorf("Emit(good) = %v", r.ok)
	}
	mtWait(t, o, id)
	tk := <-handle
	if err := tk.Emit("late", 1); !errors.Is(err, ErrTaskEnded) {
		t.Errorf("Emit after return = %v, want ErrTaskEnded", err)
	}
	if err := tk.Emit("", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Emit(\"\") after return = %v, want ErrInvalidArgument", err)
	}
	evs := mtDrain(t, o)
	if len(evs) != 2 || evs[0].EventType != "good" || string(evs[0].Payload) != `{"n":1}` || evs[1].Kind != EventCompleted {
		t.Fatalf("events %+v, want good {\"n\":1} then completed", evs)
	}
	mtShutdown(t, m)
}

func TestManagerEmitAfterCancelDelivers(t *testing.T) {
	m := mtNew(t)
	o := m.Owner("thread-1")
	started := make(chan struct{})
	emitErr := make(chan error, 1)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		if err := tk.Emit("ready", map[string]int{"port": 8080}); err != nil {
			return nil, err
		}
		close(started)
		<-ctx.Done()
		emitErr <- tk.Emit("final_words", "bye")
		return nil, context.Cause(ctx)
	}, WithWake(WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ib, _ := o.Inbox()
	if err := ib.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if evs := ib.Drain(); len(evs) != 1 || evs[0].EventType != "ready" || string(evs[0].Payload) != `{"port":8080}` {
		t.Fatalf("before cancel: %+v", evs)
	}
	if got, _ := o.Get(t.Context(), id); got.Status != StatusRunning {
		t.Fatalf("status %q before cancel", got.Status)
	}
	if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	if err := <-emitErr; err != nil {
		t.Fatalf("Emit after cancel: %v", err)
	}
	if got := mtWait(t, o, id); got.Status != StatusCancelled {
		t.Fatalf("status %q, want cancelled", got.Status)
	}
	evs := ib.Drain()
	if len(evs) != 2 || evs[0].EventType != "final_words" || string(evs[0].Payload) != `"bye"` ||
		evs[1].Kind != EventCancelled || evs[1].TaskID != id {
		t.Fatalf("after cancel: %+v", evs)
	}
	b, err := json.Marshal(evs[1])
	if err != nil || string(b) != `{"kind":"cancelled","task_id":"`+id+`"}` {
		t.Fatalf("cancelled event JSON %s, %v", b, err)
	}
	mtShutdown(t, m)
}

// TestManagerCompletionAfterRunEndReachesFallback is the lost-wakeup case of
// D6: a run binds an inbox with an WithOnClosed fallback, the run ends (closes
// the inbox) while a task still runs, and the task's events must reach the
// fallback exactly once each.
func TestManagerCompletionAfterRunEndReachesFallback(t *testing.T) {
	for _, tasks := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d tasks", tasks), func(t *testing.T) {
			m := mtNew(t)
			o := m.Owner("thread-1")
			var (
				mu       sync.Mutex
				fallback []Event
			)
			ib := NewInbox(WithOnClosed(func(ev Event) {
				mu.Lock()
				fallback = append(fallback, ev)
				mu.Unlock()
			}))
			if prev, err := m.BindInbox("thread-1", ib); err != nil || prev != nil {
				t.Fatalf("BindInbox = %v, %v", prev, err)
			}
			var ids []string
			var probes []*mtProbe
			for range tasks {
				id, p := mtSpawnProbe(t, t.Context(), o)
				ids, probes = append(ids, id), append(probes, p)
			}
			ib.Close() // the run ends while the tasks run
			var want []string
			for i, id := range ids {
				close(probes[i].release)
				mtWait(t, o, id)
				want = append(want, id)
			}
			mu.Lock()
			got := slices.Clone(fallback)
			mu.Unlock()
			var gotIDs []string
			for _, ev := range got {
				if ev.Kind != EventCompleted {
					t.Fatalf("fallback got %+v", ev)
				}
				gotIDs = append(gotIDs, ev.TaskID)
			}
			if !slices.Equal(gotIDs, want) {
				var stuck []EventKind
				if cur, err := m.Inbox("thread-1"); err == nil && cur != ib {
					stuck = mtKinds(cur.Drain())
				}
				t.Fatalf("the last task's completion after the run closed its inbox must reach WithOnClosed: "+
					"fallback got %v, want %v; events in a fresh owner inbox: %v", gotIDs, want, stuck)
			}
			// The closed inbox is forgotten once the owner has no task left.
			m.inboxMu.RLock()
			_, bound := m.inboxes["thread-1"]
			m.inboxMu.RUnlock()
			if bound {
				t.Fatal("the closed inbox of an idle owner is still bound")
			}
			mtShutdown(t, m)
		})
	}
}
