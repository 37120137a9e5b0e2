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
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
)

func TestManagerLifecycle(t *testing.T) {
	errCleanup := errors.New("cleanup failed")
	cases := []struct {
		name       string
		cancel     bool // cancel the task once it runs, then let it return
		fn         func(ctx context.Context) (any, error)
		want       bgtype.Status
		wantError  string // exact, unless wantPrefix
		wantPrefix bool
		wantResult string
		wantStack  string // a function the panic's stack names; "" for no stack
	}{
		{name: "completed with JSON result",
			fn: func(context.Context) (any, error) {
				return map[string]any{"key": "value", "nested": []int{1, 2, 3}}, nil
			},
			want: bgtype.StatusCompleted, wantResult: `{"key":"value","nested":[1,2,3]}`},
		{name: "completed with nil result",
			fn:   func(context.Context) (any, error) { return nil, nil },
			want: bgtype.StatusCompleted, wantResult: `null`},
		{name: "completed with raw JSON",
			fn:   func(context.Context) (any, error) { return json.RawMessage(`{"score":3.125}`), nil },
			want: bgtype.StatusCompleted, wantResult: `{"score":3.125}`},
		{name: "failed with error text",
			fn:   func(context.Context) (any, error) { return nil, errors.New("oops") },
			want: bgtype.StatusFailed, wantError: "oops"},
		{name: "failed with value and error keeps no result",
			fn:   func(context.Context) (any, error) { return "partial", errors.New("disk full") },
			want: bgtype.StatusFailed, wantError: "disk full"},
		{name: "context.Canceled without a cancel is a failure",
			fn: func(context.Context) (any, error) {
				return nil, fmt.Errorf("inner call: %w", context.Canceled)
			},
			want: bgtype.StatusFailed, wantError: "inner call: context canceled"},
		{name: "cancelled returning ctx.Err", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, ctx.Err() },
			want: bgtype.StatusCanceled, wantError: ErrCanceled.Error()},
		{name: "cancelled returning context.Cause", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, context.Cause(ctx) },
			want: bgtype.StatusCanceled, wantError: ErrCanceled.Error()},
		{name: "cancelled returning a wrapped ctx.Err", cancel: true,
			fn: func(ctx context.Context) (any, error) {
				return nil, fmt.Errorf("stopping: %w", ctx.Err())
			},
			want: bgtype.StatusCanceled, wantError: ErrCanceled.Error()},
		{name: "cancel asks, does not force: value after cancel completes", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return "done anyway", nil },
			want: bgtype.StatusCompleted, wantResult: `"done anyway"`},
		{name: "other error after cancel fails", cancel: true,
			fn:   func(ctx context.Context) (any, error) { return nil, errCleanup },
			want: bgtype.StatusFailed, wantError: "cleanup failed"},
		{name: "unencodable result fails",
			fn:   func(context.Context) (any, error) { return make(chan int), nil },
			want: bgtype.StatusFailed, wantError: "bgtask: result is not JSON-encodable: ", wantPrefix: true},
		{name: "a result whose encoding panics fails as a panic",
			fn:   func(context.Context) (any, error) { return panickyJSON{}, nil },
			want: bgtype.StatusFailed, wantError: "panic: encoding boom", wantStack: "panickyJSON.MarshalJSON"},
		{name: "runtime.Goexit fails",
			fn: func(context.Context) (any, error) {
				runtime.Goexit()
				return nil, nil
			},
			want: bgtype.StatusFailed, wantError: "bgtask: task function called runtime.Goexit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
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
			if !strings.HasPrefix(id, idgen.TaskPrefix) || len(id) != len(idgen.TaskPrefix)+32 {
				t.Fatalf("id %q: want %q and 32 hex digits", id, idgen.TaskPrefix)
			}
			<-running
			meta, err := o.Get(t.Context(), id)
			if err != nil || meta.Status != bgtype.StatusRunning || meta.StartedAt.IsZero() || !meta.FinishedAt.IsZero() {
				t.Fatalf("while running: Get = %+v, %v; want running with StartedAt and no FinishedAt", meta, err)
			}
			if tc.cancel {
				if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
					t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
				}
			}
			close(proceed)

			got := waitTask(t, o, id)
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
			if tc.wantStack == "" && got.Stack != "" {
				t.Fatalf("stack set without a panic: %q", got.Stack)
			}
			if tc.wantStack != "" && !strings.Contains(got.Stack, tc.wantStack) {
				t.Fatalf("stack does not name %s:\n%s", tc.wantStack, got.Stack)
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

			evs := drainOwner(t, o)
			if len(evs) != 1 {
				t.Fatalf("events %v, want exactly the terminal one", evs)
			}
			ev := evs[0]
			if ev.Kind != bgtype.EventKind(tc.want) || ev.TaskID != id {
				t.Fatalf("event %+v, want kind %q for %s", ev, tc.want, id)
			}
			switch tc.want {
			case bgtype.StatusCompleted:
				if string(ev.Result) != tc.wantResult {
					t.Fatalf("event result %s, want %s", ev.Result, tc.wantResult)
				}
			case bgtype.StatusFailed:
				if ev.Error != got.Error {
					t.Fatalf("event error %q, want %q", ev.Error, got.Error)
				}
			}
			shutdownManager(t, m)
		})
	}
}

func TestManagerPanicFails(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), panickingTask)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	got := waitTask(t, o, id)
	if got.Status != bgtype.StatusFailed || got.Error != "panic: boom" {
		t.Fatalf("got status %q error %q, want failed %q", got.Status, got.Error, "panic: boom")
	}
	if !strings.Contains(got.Stack, "panickingTask") {
		t.Fatalf("stack does not name the function:\n%s", got.Stack)
	}
	stored, err := o.Get(t.Context(), id)
	if err != nil || stored.Stack != got.Stack || stored.Status != bgtype.StatusFailed || stored.FinishedAt.IsZero() {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	evs := drainOwner(t, o)
	if len(evs) != 1 || evs[0].Kind != bgtype.EventFailed || evs[0].Error != "panic: boom" || evs[0].TaskID != id {
		t.Fatalf("events %+v, want one failed event with %q", evs, "panic: boom")
	}
	// The manager goes on.
	id2, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return 1, nil })
	if err != nil {
		t.Fatalf("Spawn after panic: %v", err)
	}
	if got := waitTask(t, o, id2); got.Status != bgtype.StatusCompleted || string(got.Result) != "1" {
		t.Fatalf("after panic: %+v", got)
	}
	shutdownManager(t, m)
}

// TestManagerCommitThenNotify: whoever drains a terminal event can Get the
// terminal record at once (D5).
func TestManagerCommitThenNotify(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	want := map[string]bgtype.Status{}
	for i := range n {
		fn := func(context.Context, *Task) (any, error) { return i, nil }
		st := bgtype.StatusCompleted
		if i%3 == 0 {
			fn = func(context.Context, *Task) (any, error) { return nil, fmt.Errorf("fail %d", i) }
			st = bgtype.StatusFailed
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
			if meta.Status != want[ev.TaskID] || bgtype.EventKind(meta.Status) != ev.Kind || meta.FinishedAt.IsZero() {
				t.Fatalf("Get(%s) after event %q: status %q finished %v, want %q", ev.TaskID, ev.Kind, meta.Status, meta.FinishedAt, want[ev.TaskID])
			}
			delete(want, ev.TaskID)
			seen++
		}
	}
	if len(want) != 0 {
		t.Fatalf("no event for %v", want)
	}
	shutdownManager(t, m)
}

// TestManagerCompletionAfterRunEndReachesFallback is the lost-wakeup case of
// D6: a run binds an inbox with an OnClosed fallback, the run ends (closes
// the inbox) while a task still runs, and the task's events must reach the
// fallback exactly once each.
func TestManagerCompletionAfterRunEndReachesFallback(t *testing.T) {
	for _, tasks := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d tasks", tasks), func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			var (
				mu       sync.Mutex
				fallback []bgtype.Event
			)
			ib := NewInbox(InboxConfig{OnClosed: func(ev bgtype.Event) {
				mu.Lock()
				fallback = append(fallback, ev)
				mu.Unlock()
			}})
			if prev, err := m.BindInbox("thread-1", ib); err != nil || prev != nil {
				t.Fatalf("BindInbox = %v, %v", prev, err)
			}
			var ids []string
			var probes []*probeTask
			for range tasks {
				id, p := spawnProbe(t, t.Context(), o)
				ids, probes = append(ids, id), append(probes, p)
			}
			ib.Close() // the run ends while the tasks run
			var want []string
			for i, id := range ids {
				close(probes[i].release)
				waitTask(t, o, id)
				want = append(want, id)
			}
			mu.Lock()
			got := slices.Clone(fallback)
			mu.Unlock()
			var gotIDs []string
			for _, ev := range got {
				if ev.Kind != bgtype.EventCompleted {
					t.Fatalf("fallback got %+v", ev)
				}
				gotIDs = append(gotIDs, ev.TaskID)
			}
			if !slices.Equal(gotIDs, want) {
				var stuck []bgtype.EventKind
				if cur, err := m.Inbox("thread-1"); err == nil && cur != ib {
					stuck = eventKinds(cur.Drain())
				}
				t.Fatalf("the last task's completion after the run closed its inbox must reach OnClosed: "+
					"fallback got %v, want %v; events in a fresh owner inbox: %v", gotIDs, want, stuck)
			}
			// The closed inbox is forgotten once the owner has no task left.
			m.inboxMu.RLock()
			_, bound := m.inboxes["thread-1"]
			m.inboxMu.RUnlock()
			if bound {
				t.Fatal("the closed inbox of an idle owner is still bound")
			}
			shutdownManager(t, m)
		})
	}
}

// panickyJSON is a result whose encoding panics.
type panickyJSON struct{}

func (panickyJSON) MarshalJSON() ([]byte, error) { panic("encoding boom") }
