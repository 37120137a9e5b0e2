package bgtask

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// The values a spawner's context carries in these tests: a request-scoped
// value, and a span context stored the way OpenTelemetry stores one (a
// struct under a private key; the otel module tests the real
// trace.ContextWithSpanContext, which the root module does not depend on).
type (
	ctxsRequestKey struct{}
	ctxsSpanKey    struct{}
	ctxsSpan       struct{ TraceID, SpanID string }
)

func ctxsSpawnerContext() context.Context {
	ctx := context.WithValue(context.Background(), ctxsRequestKey{}, "req-42")
	return context.WithValue(ctx, ctxsSpanKey{}, ctxsSpan{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"})
}

// ctxsCheckValues fails the test unless ctx carries the spawner's values.
func ctxsCheckValues(t *testing.T, who string, ctx context.Context) {
	t.Helper()
	if got, _ := ctx.Value(ctxsRequestKey{}).(string); got != "req-42" {
		t.Errorf("%s: request value %q, want %q", who, got, "req-42")
	}
	want := ctxsSpan{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}
	if got, _ := ctx.Value(ctxsSpanKey{}).(ctxsSpan); got != want {
		t.Errorf("%s: span %+v, want %+v", who, got, want)
	}
}

// TestTaskContextKeepsSpawnerValues: a task's context carries the values of
// the context it was spawned with, and so does a child the task spawns
// with its own context; TaskFromContext is still the running task.
func TestTaskContextKeepsSpawnerValues(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, p := spawnProbe(t, ctxsSpawnerContext(), o)
	ctxsCheckValues(t, "task", p.ctx)
	if tk, ok := TaskFromContext(p.ctx); !ok || tk.ID() != id {
		t.Errorf("TaskFromContext in the task = %v, %v; want task %s", tk, ok, id)
	}

	childID, child := spawnProbe(t, p.ctx, o)
	ctxsCheckValues(t, "child", child.ctx)
	if tk, ok := TaskFromContext(child.ctx); !ok || tk.ID() != childID {
		t.Errorf("TaskFromContext in the child = %v, %v; want task %s", tk, ok, childID)
	}
	close(child.release)
	close(p.release)
	waitTask(t, o, childID)
	waitTask(t, o, id)
	shutdownManager(t, m)
}

// TestTaskContextOutlivesSpawner: the spawner's deadline is not the task's,
// the spawner's context ending after Spawn returned leaves the task running,
// and the task's own cancel still ends it with its own cause.
func TestTaskContextOutlivesSpawner(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	// A deadline far away: the test never waits for it, it only reads it.
	dctx, cancelDeadline := context.WithDeadline(ctxsSpawnerContext(), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	defer cancelDeadline()
	spawner, cancelSpawner := context.WithCancelCause(dctx)
	id, p := spawnProbe(t, spawner, o)

	if d, ok := p.ctx.Deadline(); ok {
		t.Errorf("task's Deadline() = %v, true; want none", d)
	}
	spawnerGone := errors.New("request finished")
	cancelSpawner(spawnerGone)
	if err := p.ctx.Err(); err != nil {
		t.Fatalf("task's ctx.Err() after the spawner's cancel = %v, want nil", err)
	}
	select {
	case <-p.ctx.Done():
		t.Fatalf("task's Done() closed by the spawner's cancel (cause %v)", context.Cause(p.ctx))
	default:
	}
	ctxsCheckValues(t, "task after the spawner ended", p.ctx)

	if n, err := o.Cancel(context.Background(), id); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	if cause := <-p.cause; !errors.Is(cause, ErrCanceled) || errors.Is(cause, spawnerGone) {
		t.Errorf("task's cause = %v, want %v", cause, ErrCanceled)
	}
	if meta := waitTask(t, o, id); meta.Status != bgtype.StatusCanceled {
		t.Errorf("status = %s, want %s", meta.Status, bgtype.StatusCanceled)
	}
	shutdownManager(t, m)
}

// TestTaskContextHidesSpawnersToolCall: the tool call that spawned a task is
// its Parent, not a value of its context: the task's own spawns link to the
// task, not to that call, unless the task sets a call of its own.
func TestTaskContextHidesSpawnersToolCall(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	call := ToolCall{RunID: "run-1", CallID: "call-1", AgentID: "agent-1"}
	id, p := spawnProbe(t, WithToolCall(ctxsSpawnerContext(), call), o)
	if got := getTask(t, o, id).Parent; got != (bgtype.Parent{RunID: "run-1", CallID: "call-1", AgentID: "agent-1"}) {
		t.Errorf("task's Parent = %+v, want the call's lineage", got)
	}
	if got, ok := ToolCallFromContext(p.ctx); ok {
		t.Errorf("ToolCallFromContext in the task = %+v, true; want none", got)
	}
	ctxsCheckValues(t, "task", p.ctx)

	own := ToolCall{RunID: "run-1", CallID: "call-2", AgentID: id}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bgtype.Parent
	}{
		{"task's ctx", p.ctx, bgtype.Parent{TaskID: id, RunID: "run-1"}},
		{"task's own call", WithToolCall(p.ctx, own), bgtype.Parent{TaskID: id, RunID: "run-1", CallID: "call-2", AgentID: id}},
	} {
		childID, child := spawnProbe(t, tc.ctx, o)
		if got := getTask(t, o, childID).Parent; got != tc.want {
			t.Errorf("%s: child's Parent = %+v, want %+v", tc.name, got, tc.want)
		}
		if _, ok := ToolCallFromContext(child.ctx); ok {
			t.Errorf("%s: ToolCallFromContext in the child is set, want none", tc.name)
		}
		close(child.release)
		waitTask(t, o, childID)
	}
	close(p.release)
	waitTask(t, o, id)
	shutdownManager(t, m)
}
