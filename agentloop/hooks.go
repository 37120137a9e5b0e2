package agentloop

import (
	"context"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// The phases an agent loop calls, one small interface each, so a loop can
// take exactly what it uses; *agent.Plugin implements them all.
type (
	// RunStartHook opens a run.
	RunStartHook interface {
		RunStart(ctx context.Context, run bgtask.RunInfo) error
	}
	// BeforeInferenceHook gives the messages to show the model before each
	// inference.
	BeforeInferenceHook interface {
		BeforeInference(ctx context.Context) ([]agent.PromptMessage, error)
	}
	// AfterToolCallHook hears of each tool call the loop ran.
	AfterToolCallHook interface {
		AfterToolCall(ctx context.Context, call bgtask.ToolCall) error
	}
	// StepEndHook says, at the end of a step, whether work is pending.
	StepEndHook interface {
		StepEnd(ctx context.Context) (pending bool, err error)
	}
	// RunEndHook closes a run.
	RunEndHook interface {
		RunEnd(ctx context.Context, out bgtask.RunOutcome) error
	}
	// BoundaryHook delivers events at boundaries other than a step's start
	// (a natural end, a suspension) and waits for them.
	BoundaryHook interface {
		Deliver(ctx context.Context) ([]agent.PromptMessage, error)
		WaitEvent(ctx context.Context) error
	}
)

// LoopHooks is every phase together: what Run takes.
type LoopHooks interface {
	RunStartHook
	BeforeInferenceHook
	AfterToolCallHook
	StepEndHook
	BoundaryHook
	RunEndHook
}

var _ LoopHooks = (*agent.Plugin)(nil)
