package agent

import (
	"errors"
	"testing"

	"github.com/bgtask/bgtask"
)

// Close is idempotent; afterwards RunStart fails with ErrClosed and the
// other phases with ErrNoRun.
func TestPluginClosePhases(t *testing.T) {
	pr := newPluginRun(t)
	for range 2 {
		if err := pr.p.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := pr.p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-2"}); !errors.Is(err, bgtask.ErrClosed) || err.Error() != "bgtask: receiver: closed: bgtask: manager closed" {
		t.Fatalf("RunStart after Close: %v, want ErrClosed", err)
	}
	_, deliverErr := pr.p.Deliver(t.Context())
	_, beforeErr := pr.p.BeforeInference(t.Context())
	_, stepErr := pr.p.StepEnd(t.Context())
	for name, err := range map[string]error{
		"Deliver":         deliverErr,
		"BeforeInference": beforeErr,
		"StepEnd":         stepErr,
		"AfterToolCall":   pr.p.AfterToolCall(t.Context(), bgtask.ToolCall{}),
		"WaitEvent":       pr.p.WaitEvent(t.Context()),
		"RunEnd":          pr.p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1"}),
	} {
		if err != bgtask.ErrNoRun {
			t.Errorf("%s after Close: %v, want ErrNoRun", name, err)
		}
	}
}
