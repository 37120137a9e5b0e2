package agentloop

import (
	"context"
	"encoding/json"
	"errors"
)

// Tool is a tool the loop can run. It has the shape of agent.Tool, so the
// model-facing task tools convert directly: agentloop.Tool(t).
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	Call        func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// ErrSuspend, returned (wrapped) by a tool, suspends the run until a human
// decision answers the call (Config.Decisions).
var ErrSuspend = errors.New("agentloop: tool call suspended for a decision")

// Decision answers a suspended tool call: Result becomes the call's result.
type Decision struct {
	CallID string
	Result string
}
