package bga2a

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"
)

func TestState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   bgtype.Status
		want a2a.TaskState
	}{
		{bgtype.StatusQueued, "submitted"},
		{bgtype.StatusRunning, "working"},
		{bgtype.StatusAwaitingInput, "input-required"},
		{bgtype.StatusCompleted, "completed"},
		{bgtype.StatusFailed, "failed"},
		{bgtype.StatusInterrupted, "failed"},
		{bgtype.StatusCanceled, "canceled"},
		{"", "unknown"},
		{"bogus", "unknown"},
	}
	for _, tt := range tests {
		if got := State(tt.in); got != tt.want {
			t.Errorf("State(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every status bgtask defines has a known state.
	for _, s := range bgtype.Statuses() {
		if State(s) == a2a.TaskStateUnknown {
			t.Errorf("State(%q) is unknown", s)
		}
	}
}
