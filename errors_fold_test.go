package bgtask

import (
	"errors"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// A folded error keeps its own text and matches exactly the exported
// errors of its family, and no other.
func TestFoldedErrors(t *testing.T) {
	all := []error{ErrNotFound, ErrClosed, ErrInvalidArgument, ErrDuplicateName, ErrLimit, ErrTerminal, ErrInboxClosed,
		ErrNotSubAgent, ErrNotLive, ErrElsewhere, ErrInputPending, ErrNoInputRequest, ErrCanceled, ErrShutdown, ErrInstanceLost, ErrTimeout, bgtype.ErrInvalidOwner}
	tests := []struct {
		err  error
		text string
		is   []error
	}{
		{errDepthLimit, "bgtask: lineage depth limit reached", []error{ErrLimit}},
		{errFanOutLimit, "bgtask: fan-out limit reached", []error{ErrLimit}},
		{errParentNotFound, "bgtask: parent task not found", []error{ErrNotFound}},
		{errNotOwner, "bgtask: caller does not own this task", []error{ErrNotFound}},
		{errTaskEnded, "bgtask: task has ended", []error{ErrTerminal}},
		{errParentCanceled, "bgtask: parent task cancelled", []error{ErrCanceled}},
		{errRunCanceled, "bgtask: run cancelled", []error{ErrCanceled}},
		{bgtype.ErrInvalidOwner, "bgtask: owner id is empty", []error{ErrInvalidArgument, bgtype.ErrInvalidOwner}},
	}
	for _, tc := range tests {
		t.Run(tc.text, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.text {
				t.Fatalf("text %q, want %q", got, tc.text)
			}
			for _, target := range all {
				want := false
				for _, w := range tc.is {
					want = want || w == target
				}
				if got := errors.Is(tc.err, target); got != want {
					t.Errorf("errors.Is(%q, %q) = %v, want %v", tc.err, target, got, want)
				}
			}
			if errors.Is(tc.err, errDepthLimit) != (tc.err == errDepthLimit) {
				t.Errorf("%q matches another folded error", tc.err)
			}
		})
	}
}
