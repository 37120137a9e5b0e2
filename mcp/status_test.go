package bgmcp_test

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		st      bgtype.Status
		isError bool
		want    string
	}{
		{bgtype.StatusQueued, false, "working"},
		{bgtype.StatusRunning, false, "working"},
		{bgtype.StatusAwaitingInput, false, "input_required"},
		{bgtype.StatusCompleted, false, "completed"},
		{bgtype.StatusCompleted, true, "failed"},
		{bgtype.StatusFailed, false, "failed"},
		{bgtype.StatusInterrupted, false, "failed"},
		{bgtype.StatusCanceled, false, "cancelled"},
		{bgtype.Status("bogus"), false, "failed"},
	} {
		if got := bgmcp.StatusOf(tc.st, tc.isError); got != tc.want {
			t.Errorf("StatusOf(%s, %v) = %q, want %q", tc.st, tc.isError, got, tc.want)
		}
	}
	if n := len(bgtype.Statuses()); n != 7 {
		t.Errorf("bgtask has %d statuses, the table maps 7", n)
	}
}
