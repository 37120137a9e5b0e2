package bgotel

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Spawn is o.Spawn with a span: it starts a task exactly like o.Spawn and
// returns what that returns. The task's span starts now, as a child of the
// span on ctx (a tool call's, say), and ends when the task reaches its
// terminal status; fn's context carries it, so spans started in the task
// are its children. The Manager must report to tel (ManagerOptions),
// otherwise the span ends at once with an error status saying so. If the
// spawn fails, the span, named "bgtask spawn", ends with the owner as its
// only attribute and the error as its status.
//
// ctx is what o.Spawn gets; its end does not end the span, since the task
// outlives the call. A panic in fn is the task's, recovered by the Manager
// as always: the span ends with error.type "panic". Safe for concurrent use.
func (tel *Telemetry) Spawn(ctx context.Context, o bgtask.Owner, fn bgtask.Func, opts ...bgtask.SpawnOption) (string, error) {
	return tel.spawn(ctx, o, fn, false, opts)
}

// SpawnAgent is o.SpawnAgent with a span, like Spawn.
func (tel *Telemetry) SpawnAgent(ctx context.Context, o bgtask.Owner, fn bgtask.Func, opts ...bgtask.SpawnOption) (string, error) {
	return tel.spawn(ctx, o, fn, true, opts)
}

func (tel *Telemetry) spawn(ctx context.Context, o bgtask.Owner, fn bgtask.Func, agent bool, opts []bgtask.SpawnOption) (string, error) {
	_, span := tel.tracer.Start(ctx, spanName(""), trace.WithSpanKind(trace.SpanKindInternal))
	s := &taskSpan{span: span}
	wrapped := fn
	if fn != nil { // a nil fn is the spawn's error to report
		wrapped = func(tctx context.Context, t *bgtask.Task) (any, error) {
			// The first transition was observed before this goroutine
			// started, so the state is there; every event of the task
			// comes after this line.
			if st := tel.task(t.ID()); st != nil {
				st.attach(s)
			}
			return fn(trace.ContextWithSpan(tctx, span), t)
		}
	}
	spawn := o.Spawn
	if agent {
		spawn = o.SpawnAgent
	}
	id, err := spawn(ctx, wrapped, opts...)
	if err != nil {
		span.SetAttributes(KeyTaskOwner.String(o.ID()))
		span.SetStatus(codes.Error, cut(err.Error(), maxStatusDescription))
		span.End()
		return id, err
	}
	tel.settle(ctx, o, id, s)
	return id, nil
}

// settle attaches the span of a task just spawned to the task's state. If
// the state is gone, the task has ended: it ran, and its end ended the
// span; or it was cancelled while queued before Spawn returned, and its
// terminal record, committed before it was observed, is read from the
// store. Or the Manager does not report to tel.
func (tel *Telemetry) settle(ctx context.Context, o bgtask.Owner, id string, s *taskSpan) {
	if st := tel.task(id); st != nil {
		st.attach(s)
		return
	}
	if s.attached.Load() {
		return
	}
	span := s.span
	meta, err := o.Get(context.WithoutCancel(ctx), id)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, cut(fmt.Sprintf("bgotel: task %s: %v", id, err), maxStatusDescription))
		span.End()
	case !meta.Status.IsTerminal():
		span.SetAttributes(identity(meta)...)
		span.SetStatus(codes.Error, "bgotel: the Manager does not report to this Telemetry (pass ManagerOptions to bgtask.New)")
		span.End()
	default:
		span.SetName(spanName(meta.Type))
		span.SetAttributes(identity(meta)...)
		s.end(meta, "")
	}
}
