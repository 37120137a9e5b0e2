package bgtask

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// What a host that writes its own agent loop and tools needs of an owner
// beyond spawning and reading: who is calling (CurrentTask), whether the
// Manager still takes changes (Closed), cancelling the caller
// (CancelCurrent). The agent package's tools are built on these.

// CurrentTask returns the task ctx runs in (TaskFromContext) when it is the
// owner itself (a sub-agent whose own loop calls a tool) or one of the
// owner's tasks on this Manager; ok is false for any other task, another
// Manager's, or a ctx without a task. A tool reads its caller so.
func (o Owner) CurrentTask(ctx context.Context) (t *Task, ok bool) {
	t, ok = TaskFromContext(ctx)
	if !ok || t.m != o.m || (t.rec.ID != o.id && t.rec.Owner != o.id) || !bgtype.ValidOwner(o.id) {
		return nil, false
	}
	return t, true
}

// Closed reports whether the owner's Manager has shut down (Shutdown or
// Stop was called): from then on every call that changes something fails
// with ErrClosed, while reads go on working. Safe for concurrent use.
func (o Owner) Closed() bool { return o.m.closed.Load() }

// CancelCurrent cancels the caller that ctx names, for a tool that lets a
// model stop itself: the current task (CurrentTask) with its attached
// descendants, else the owner's run of ctx's tool call (ToolCallFromContext,
// as CancelRun). It returns how many live tasks this call signalled, and
// whether that task or run had been cancelled before (then n is 0). Errors,
// in this order: ErrInvalidArgument (blank owner), ErrClosed, ErrInvalidArgument when ctx
// names neither a task of the owner nor a run. WithReason says why.
func (o Owner) CancelCurrent(ctx context.Context, opts ...CancelOption) (n int, before bool, err error) {
	switch {
	case !bgtype.ValidOwner(o.id):
		return 0, false, bgtype.ErrInvalidOwner
	case o.m.closed.Load():
		return 0, false, ErrClosed
	}
	reason := cancelReason(opts)
	if t, ok := o.CurrentTask(ctx); ok {
		n, before = o.m.cancelTree(t, reason)
		return n, before, nil
	}
	if c, ok := ToolCallFromContext(ctx); ok && bgtype.ValidOwner(c.RunID) {
		return o.cancelRunCtx(context.WithoutCancel(ctx), c.RunID, reason)
	}
	return 0, false, fmt.Errorf("%w: no current task or run in the context", ErrInvalidArgument)
}

// MarkAnswered is for a call that returned meta, a terminal record of one
// of the owner's tasks, to the model as its result (a wait tool): the
// owner must not hear of that end a second time. The task's terminal
// event, if it still waits in the owner's inbox, is taken out. While the
// owner has a run open on this Manager, the end joins what that run handed
// out: marked announced once the run proves the model answered (the next
// Deliver, RunEnd), and handed out again as an event if the run is given
// back (Receiver.Undeliver) or the process dies first. Otherwise the
// record is marked announced now (meta.Announced is set), so neither the
// next Deliver nor a restart announces it again. A record that is not terminal,
// silent, or announced already is left alone. An event that a Receiver
// handed out already, or keeps between runs, is not reached; a mark that
// cannot be committed is logged, and a restart may then announce the end
// once more. The commit does not depend on ctx's end.
func (o Owner) MarkAnswered(ctx context.Context, meta *bgtype.TaskMeta) {
	if meta == nil || meta.Owner != o.id || !bgtype.ValidOwner(o.id) {
		return
	}
	o.answered(ctx, meta)
}
