package bgotel

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/bgtask/bgtask"
)

// A task's span is a child of the span on the spawner's context, carries
// the task's identity and lineage, and is the parent of the spans the task
// starts.
func TestSpanParentAndAttributes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		ctx, call := b.tp.Tracer("test").Start(context.Background(), "tool call")
		ctx = bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: "call-1", AgentID: "agent-1"})
		var inTask trace.SpanContext
		id := b.spawn(t, ctx, "alice", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			_, child := trace.SpanFromContext(ctx).TracerProvider().Tracer("task").Start(ctx, "fetch")
			inTask = child.SpanContext()
			child.End()
			return "ok", nil
		}, bgtask.WithName("research"), bgtask.WithType("research"))
		b.wait(t, id)
		call.End()

		s := b.span(t, id)
		if s.Name() != "bgtask research" {
			t.Fatalf("span name %q, want %q", s.Name(), "bgtask research")
		}
		if s.Parent().SpanID() != call.SpanContext().SpanID() || s.SpanContext().TraceID() != call.SpanContext().TraceID() {
			t.Fatalf("task span parent %v, want the tool call's span %v", s.Parent(), call.SpanContext())
		}
		want := []string{
			"bgtask.agent.id=agent-1", "bgtask.call.id=call-1", "bgtask.run.id=run-1",
			"bgtask.task.id=" + id, "bgtask.task.name=research", "bgtask.task.owner=alice",
			"bgtask.task.status=completed", "bgtask.task.type=research",
		}
		if got := attrs(s.Attributes()); !slices.Equal(got, want) {
			t.Fatalf("attributes\n%q\nwant\n%q", got, want)
		}
		var child []string
		for _, e := range b.spans.Ended() {
			if e.SpanContext().SpanID() == inTask.SpanID() {
				child = append(child, e.Name())
				if e.Parent().SpanID() != s.SpanContext().SpanID() {
					t.Fatalf("span started in the task has parent %v, want the task's span %v", e.Parent(), s.SpanContext())
				}
			}
		}
		if !slices.Equal(child, []string{"fetch"}) {
			t.Fatalf("spans started in the task: %q, want [fetch]", child)
		}
	})
}

// A task spawned inside a task is a child of its parent task's span, with
// the parent task's id and run.
func TestSpanNestedSpawn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		ctx := bgtask.WithToolCall(context.Background(), bgtask.ToolCall{RunID: "run-1"})
		var childID string
		parent := b.spawn(t, ctx, "alice", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			childID = b.spawn(t, ctx, "alice", func(context.Context, *bgtask.Task) (any, error) { return nil, nil })
			_, err := b.m.Wait(ctx, childID)
			return nil, err
		})
		b.wait(t, parent)
		ps, cs := b.span(t, parent), b.span(t, childID)
		if cs.Parent().SpanID() != ps.SpanContext().SpanID() {
			t.Fatalf("child span parent %v, want the parent task's span %v", cs.Parent(), ps.SpanContext())
		}
		want := []string{"bgtask.parent.task.id=" + parent, "bgtask.run.id=run-1", "bgtask.task.id=" + childID,
			"bgtask.task.owner=alice", "bgtask.task.status=completed", "bgtask.task.type=task"}
		if got := attrs(cs.Attributes()); !slices.Equal(got, want) {
			t.Fatalf("child attributes\n%q\nwant\n%q", got, want)
		}
	})
}

// The span's end: status attribute, error kind, span status.
func TestSpanEnd(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name       string
		fn         bgtask.Func
		opts       []bgtask.SpawnOption
		cancel     bool // cancel it once it runs
		queued     bool // behind a blocker with one slot, cancelled before it runs
		wantStatus bgtype.Status
		wantKind   string
		wantCode   codes.Code
		wantDesc   string
	}{
		{name: "completed", fn: func(context.Context, *bgtask.Task) (any, error) { return 1, nil },
			wantStatus: bgtype.StatusCompleted, wantCode: codes.Unset},
		{name: "failed", fn: func(context.Context, *bgtask.Task) (any, error) { return nil, boom },
			wantStatus: bgtype.StatusFailed, wantKind: "error", wantCode: codes.Error, wantDesc: "boom"},
		{name: "timeout", opts: []bgtask.SpawnOption{bgtask.WithTimeout(time.Minute)},
			fn:         func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, context.Cause(ctx) },
			wantStatus: bgtype.StatusFailed, wantKind: "timeout", wantCode: codes.Error, wantDesc: "bgtask: task timed out after 1m0s"},
		{name: "panic", fn: func(context.Context, *bgtask.Task) (any, error) { panic("kaput") },
			wantStatus: bgtype.StatusFailed, wantKind: "panic", wantCode: codes.Error, wantDesc: "panic: kaput"},
		{name: "cancelled", cancel: true,
			fn:         func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
			wantStatus: bgtype.StatusCanceled, wantKind: "cancelled", wantCode: codes.Unset},
		{name: "cancelled while queued", queued: true,
			fn:         func(context.Context, *bgtask.Task) (any, error) { return 1, nil },
			wantStatus: bgtype.StatusCanceled, wantKind: "cancelled", wantCode: codes.Unset},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := newBundle(t, bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1, QueueWhenFull: true}))
				release := make(chan struct{})
				var blocker string
				if tc.queued {
					blocker = b.spawn(t, context.Background(), "alice", func(context.Context, *bgtask.Task) (any, error) { <-release; return nil, nil })
				}
				id := b.spawn(t, context.Background(), "alice", tc.fn, tc.opts...)
				synctest.Wait()
				if tc.cancel || tc.queued {
					if n, err := b.m.Owner("alice").Cancel(context.Background(), id); n != 1 || err != nil {
						t.Fatalf("Cancel: (%d, %v), want (1, nil)", n, err)
					}
				}
				close(release)
				if meta := b.wait(t, id); meta.Status != tc.wantStatus {
					t.Fatalf("status %q, want %q", meta.Status, tc.wantStatus)
				}
				if blocker != "" {
					b.wait(t, blocker)
				}
				s := b.span(t, id)
				if got := attrOf(s.Attributes(), KeyTaskStatus); got != string(tc.wantStatus) {
					t.Fatalf("bgtask.task.status %q, want %q", got, tc.wantStatus)
				}
				if got := attrOf(s.Attributes(), KeyErrorType); got != tc.wantKind {
					t.Fatalf("error.type %q, want %q", got, tc.wantKind)
				}
				if st := s.Status(); st.Code != tc.wantCode || st.Description != tc.wantDesc {
					t.Fatalf("span status (%v, %q), want (%v, %q)", st.Code, st.Description, tc.wantCode, tc.wantDesc)
				}
			})
		})
	}
}

// Progress, messages and input requests are span events, in the order the
// task made them, after the start of a queued task; no payload is recorded.
func TestSpanEventsInOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t, bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1, QueueWhenFull: true}))
		release := make(chan struct{})
		blocker := b.spawn(t, context.Background(), "alice", func(context.Context, *bgtask.Task) (any, error) { <-release; return nil, nil })
		id := b.spawn(t, context.Background(), "alice", func(ctx context.Context, tk *bgtask.Task) (any, error) {
			if err := tk.Emit("step", map[string]int{"done": 1}); err != nil {
				return nil, err
			}
			if err := tk.Emit("step", map[string]int{"done": 2}); err != nil {
				return nil, err
			}
			if _, err := tk.RequestInput(ctx, "which one?"); err != nil {
				return nil, err
			}
			if err := tk.Emit("fetch", "secret payload"); err != nil {
				return nil, err
			}
			return nil, tk.Emit(bgtype.EventTypeMessage, bgtype.Message{Content: "done"})
		}, bgtask.WithWake(bgtype.WakeSilent))
		close(release)
		synctest.Wait() // the task waits for the answer
		meta, err := b.m.Owner("alice").Get(context.Background(), id)
		if err != nil || meta.Input == nil {
			t.Fatalf("Get: %+v, %v; want an input request", meta, err)
		}
		if _, err := b.m.Owner("alice").Send(context.Background(), id, bgtype.Message{Content: "the first", InReplyTo: meta.Input.ID}); err != nil {
			t.Fatal(err)
		}
		b.wait(t, id)
		b.wait(t, blocker)
		want := []string{
			"bgtask.task.running",
			"bgtask.task.progress bgtask.event.type=step",
			"bgtask.task.progress bgtask.event.type=step",
			"bgtask.task.input_requested bgtask.input.id=" + meta.Input.ID,
			"bgtask.task.input_closed bgtask.input.id=" + meta.Input.ID,
			"bgtask.task.progress bgtask.event.type=fetch",
			"bgtask.task.message",
		}
		if got := events(b.span(t, id)); !slices.Equal(got, want) {
			t.Fatalf("span events\n%q\nwant\n%q", got, want)
		}
	})
}

// A spawn that fails still ends its span, with the error.
func TestSpanSpawnFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		ctx, call := b.tp.Tracer("test").Start(context.Background(), "tool call")
		_, err := b.tel.Spawn(ctx, b.m.Owner("alice"), nil)
		if !errors.Is(err, bgtask.ErrInvalidArgument) {
			t.Fatalf("Spawn(nil): %v, want ErrInvalidArgument", err)
		}
		call.End()
		ended := b.spans.Ended()
		if len(ended) != 2 {
			t.Fatalf("%d spans, want 2", len(ended))
		}
		s := ended[0]
		if s.Name() != "bgtask spawn" || s.Parent().SpanID() != call.SpanContext().SpanID() ||
			s.Status().Code != codes.Error || s.Status().Description != err.Error() ||
			!slices.Equal(attrs(s.Attributes()), []string{"bgtask.task.owner=alice"}) {
			t.Fatalf("span %q parent %v status %+v attrs %v; want \"bgtask spawn\", child of the call, error %q, the owner",
				s.Name(), s.Parent().SpanID(), s.Status(), s.Attributes(), err)
		}
	})
}

// Without the Manager's observers, a span cannot follow the task: it ends
// at once and says why.
func TestSpanManagerNotReporting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		m, err := bgtask.New() // no ManagerOptions
		if err != nil {
			t.Fatal(err)
		}
		defer m.Shutdown(context.Background())
		release := make(chan struct{})
		id, err := b.tel.Spawn(context.Background(), m.Owner("alice"), func(context.Context, *bgtask.Task) (any, error) { <-release; return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		s := b.span(t, id)
		const want = "bgotel: the Manager does not report to this Telemetry (pass ManagerOptions to bgtask.New)"
		if s.Status().Code != codes.Error || s.Status().Description != want {
			t.Fatalf("span status %+v, want error %q", s.Status(), want)
		}
		close(release)
	})
}

// A task that was cancelled while queued, and whose end was observed before
// Spawn could attach its span (a race no test can order from outside),
// still gets its span ended from the stored record.
func TestSpanSettleAfterEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t, bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1, QueueWhenFull: true}))
		o := b.m.Owner("alice")
		release := make(chan struct{})
		blocker, err := o.Spawn(context.Background(), func(context.Context, *bgtask.Task) (any, error) { <-release; return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		id, err := o.Spawn(context.Background(), func(context.Context, *bgtask.Task) (any, error) { return nil, nil }, bgtask.WithName("late"))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := o.Cancel(context.Background(), id); n != 1 || err != nil {
			t.Fatalf("Cancel: (%d, %v)", n, err)
		}
		b.wait(t, id)
		close(release)
		b.wait(t, blocker)

		_, span := b.tel.tracer.Start(context.Background(), spanName(""))
		b.tel.settle(context.Background(), o, id, &taskSpan{span: span})
		s := b.span(t, id)
		want := []string{"bgtask.task.id=" + id, "bgtask.task.name=late", "bgtask.task.owner=alice",
			"bgtask.task.status=cancelled", "bgtask.task.type=task", "error.type=cancelled"}
		if got := attrs(s.Attributes()); s.Name() != "bgtask task" || !slices.Equal(got, want) {
			t.Fatalf("span %q attributes\n%q\nwant \"bgtask task\"\n%q", s.Name(), got, want)
		}
	})
}

// A task spawned without a span keeps nothing for one: its events are not
// held for a span that never comes.
func TestNoSpanKeepsNoEvents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		release := make(chan struct{})
		id, err := b.m.Owner("alice").Spawn(context.Background(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			for range 3 {
				if err := tk.Emit("step", 1); err != nil {
					return nil, err
				}
			}
			select { // a failed check leaves it to Shutdown
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st := b.tel.task(id)
		if st == nil {
			t.Fatal("no state for a live task")
		}
		st.mu.Lock()
		n, span := len(st.pending), st.span
		st.mu.Unlock()
		if n != 0 || span != nil {
			t.Fatalf("%d pending events, span %v; want none", n, span)
		}
		close(release)
		b.wait(t, id)
		if st := b.tel.task(id); st != nil || len(b.spans.Ended()) != 0 {
			t.Fatalf("after the end: state %v, %d spans; want none", st, len(b.spans.Ended()))
		}
	})
}

// failingStore fails every commit of a terminal record.
type failingStore struct{ *memstore.Store }

func (s failingStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	for _, a := range actions {
		for _, meta := range a.Tasks {
			if meta.Status.IsTerminal() {
				return errors.New("disk full")
			}
		}
	}
	return s.Store.Commit(ctx, owner, actions...)
}

// A task whose terminal record cannot be committed still ends its span,
// with the commit's error, and is counted as finished; nothing is kept.
func TestSpanEndNotCommitted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t, bgtask.WithStore(failingStore{memstore.New()}), bgtask.WithTuning(bgtask.Tuning{CommitAttempts: 1, CommitBackoff: time.Millisecond}))
		id := b.spawn(t, context.Background(), "alice", func(context.Context, *bgtask.Task) (any, error) {
			<-time.After(time.Second)
			return "done", nil
		}, bgtask.WithWake(bgtype.WakeSilent))
		synctest.Wait()
		<-time.After(time.Second)
		synctest.Wait()
		s := b.span(t, id)
		const desc = "bgtask: terminal record not committed: disk full"
		if got := attrOf(s.Attributes(), KeyTaskStatus); got != "completed" || s.Status().Code != codes.Error || s.Status().Description != desc {
			t.Fatalf("status attribute %q, span status %+v; want completed, error %q", got, s.Status(), desc)
		}
		if st := b.tel.task(id); st != nil {
			t.Fatalf("state kept after the end: %+v", st)
		}
		got := b.collect(t)
		checkPoints(t, MetricFinished, intPoints(t, got[MetricFinished]), []string{"bgtask.task.status=completed bgtask.task.type=task: 1"})
		checkPoints(t, MetricDuration, histPoints(t, got[MetricDuration]), []string{"bgtask.task.status=completed bgtask.task.type=task: count=1 sum=1"})
	})
}

// A sub-agent's span is named for its type, and the tasks it starts as an
// agent through Spawn are children of it, owned by it.
func TestSpanSubAgent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		var childID string
		agent, err := b.tel.SpawnAgent(context.Background(), b.m.Owner("alice"), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			o, err := tk.Agent()
			if err != nil {
				return nil, err
			}
			if childID, err = b.tel.Spawn(ctx, o, func(context.Context, *bgtask.Task) (any, error) { return nil, nil }); err != nil {
				return nil, err
			}
			_, err = o.Wait(ctx, childID)
			return nil, err
		}, bgtask.WithName("helper"))
		if err != nil {
			t.Fatal(err)
		}
		b.wait(t, agent)
		as, cs := b.span(t, agent), b.span(t, childID)
		if as.Name() != "bgtask sub_agent" || cs.Name() != "bgtask task" {
			t.Fatalf("span names %q, %q; want \"bgtask sub_agent\", \"bgtask task\"", as.Name(), cs.Name())
		}
		if cs.Parent().SpanID() != as.SpanContext().SpanID() {
			t.Fatalf("child span parent %v, want the sub-agent's span %v", cs.Parent(), as.SpanContext())
		}
		want := []string{"bgtask.parent.task.id=" + agent, "bgtask.task.id=" + childID, "bgtask.task.owner=" + agent,
			"bgtask.task.status=completed", "bgtask.task.type=task"}
		if got := attrs(cs.Attributes()); !slices.Equal(got, want) {
			t.Fatalf("child attributes\n%q\nwant\n%q", got, want)
		}
	})
}
