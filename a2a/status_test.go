package bga2a

import (
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

func TestState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   bgtask.TaskStatus
		want a2a.TaskState
	}{
		{bgtask.StatusQueued, "submitted"},
		{bgtask.StatusRunning, "working"},
		{bgtask.StatusAwaitingInput, "input-required"},
		{bgtask.StatusCompleted, "completed"},
		{bgtask.StatusFailed, "failed"},
		{bgtask.StatusInterrupted, "failed"},
		{bgtask.StatusCancelled, "canceled"},
		{"", "unknown"},
		{"bogus", "unknown"},
	}
	for _, tt := range tests {
		if got := State(tt.in); got != tt.want {
			t.Errorf("State(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every status bgtask defines has a known state.
	for _, s := range bgtask.Statuses() {
		if State(s) == a2a.TaskStateUnknown {
			t.Errorf("State(%q) is unknown", s)
		}
	}
}
