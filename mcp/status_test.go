package bgmcp_test

import (
	"testing"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
)

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		st      bgtask.TaskStatus
		isError bool
		want    string
	}{
		{bgtask.StatusQueued, false, "working"},
		{bgtask.StatusRunning, false, "working"},
		{bgtask.StatusAwaitingInput, false, "input_required"},
		{bgtask.StatusCompleted, false, "completed"},
		{bgtask.StatusCompleted, true, "failed"},
		{bgtask.StatusFailed, false, "failed"},
		{bgtask.StatusInterrupted, false, "failed"},
		{bgtask.StatusCancelled, false, "cancelled"},
		{bgtask.TaskStatus("bogus"), false, "failed"},
	} {
		if got := bgmcp.StatusOf(tc.st, tc.isError); got != tc.want {
			t.Errorf("StatusOf(%s, %v) = %q, want %q", tc.st, tc.isError, got, tc.want)
		}
	}
	if n := len(bgtask.Statuses()); n != 7 {
		t.Errorf("bgtask has %d statuses, the table maps 7", n)
	}
}
