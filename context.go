package bgtask

import (
	"context"
	"time"
)

type (
	taskKey     struct{}
	toolCallKey struct{}
)

// ToolCall is the lineage of a tool call in an agent loop: the run it belongs
// to, the call id and the agent that made it. An agent loop puts it on the
// context of each tool call with WithToolCall, so tasks spawned by the tool
// link themselves to the call.
type ToolCall struct {
	RunID   string
	CallID  string
	AgentID string
}

// WithToolCall returns a copy of ctx that carries call. A spawn made with
// the returned context fills the empty RunID, CallID and AgentID of its
// Parent from call.
func WithToolCall(ctx context.Context, call ToolCall) context.Context {
	return context.WithValue(ctx, toolCallKey{}, call)
}

// ToolCallFromContext returns the tool call carried by ctx, if any. A task's
// context does not carry the call that spawned the task (the task's Parent
// records it), only a call set on a context derived from it.
func ToolCallFromContext(ctx context.Context) (ToolCall, bool) {
	c, ok := ctx.Value(toolCallKey{}).(ToolCall)
	return c, ok
}

// TaskFromContext returns the task whose function is running with ctx (or a
// context derived from it), if any. A spawn made inside a task with the same
// Manager links to it as its parent.
func TaskFromContext(ctx context.Context) (*Task, bool) {
	t, ok := ctx.Value(taskKey{}).(*Task)
	return t, ok
}

// taskContext is the context given to a task function: the Task itself,
// seen as a context (a conversion of the pointer, no allocation), whose
// Done, Err and Deadline are those of the task's cancellable context
// (Task.cctx) and whose values are the task itself and the spawner's other
// values, except its tool call: the task is not that call, so its own
// spawns and tool calls must not be taken for the call's (a sub-agent's
// loop sets its own calls with WithToolCall on a context derived from this
// one). context.Cause reads the cause of Task.cctx through Value.
type taskContext Task

// valuesOnly is the parent of a task's cancellable context: the spawner's
// values without its cancellation or deadline, like context.WithoutCancel,
// but kept inside the Task so it costs no allocation of its own.
type valuesOnly struct{ parent context.Context }

func (valuesOnly) Deadline() (deadline time.Time, ok bool) { return }
func (valuesOnly) Done() <-chan struct{}                   { return nil }
func (valuesOnly) Err() error                              { return nil }
func (c *valuesOnly) Value(key any) any                    { return c.parent.Value(key) }
func (c *valuesOnly) String() string                       { return "bgtask.valuesOnly" }

func (c *taskContext) Deadline() (deadline time.Time, ok bool) { return c.cctx.Deadline() }
func (c *taskContext) Done() <-chan struct{}                   { return c.cctx.Done() }
func (c *taskContext) Err() error                              { return c.cctx.Err() }

func (c *taskContext) Value(key any) any {
	switch key.(type) {
	case taskKey:
		return (*Task)(c)
	case toolCallKey:
		return nil
	}
	return c.cctx.Value(key)
}

func (c *taskContext) String() string {
	if s, ok := c.cctx.(interface{ String() string }); ok {
		return s.String()
	}
	return "bgtask.taskContext"
}

// context returns the context given to t's function.
func (t *Task) context() context.Context { return (*taskContext)(t) }
