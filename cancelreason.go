package bgtask

import (
	"errors"

	"github.com/bgtask/bgtask/internal/jsoncap"
)

// MaxCancelReasonBytes caps a cancel's reason (WithReason); a longer one is
// cut, with a marker that gives its size.
const MaxCancelReasonBytes = 1024

// CancelOption configures a cancel (Cancel, CancelTree, CancelRun).
type CancelOption func(*cancelConfig)

type cancelConfig struct{ reason string }

// WithReason says why a cancel is made. The reason is kept on each task the
// cancel ends (TaskMeta.CancelReason, cut to MaxCancelReasonBytes), reaches
// the task through context.Cause (an error that matches ErrCanceled and
// the cancel's own cause, such as ErrCanceled (run), and whose text ends with
// the reason), and is shown in the cancelled event and by get_task. An
// empty reason is no reason. A cancel that another instance carries out
// (SharedStore.RequestCancel) carries it there.
func WithReason(reason string) CancelOption {
	return func(c *cancelConfig) { c.reason, _ = jsoncap.Text(reason, MaxCancelReasonBytes) }
}

// cancelReason returns the reason the options give.
func cancelReason(opts []CancelOption) string {
	var c cancelConfig
	for _, o := range opts {
		o(&c)
	}
	return c.reason
}

// withReason returns base, or base with the reason when there is one.
func withReason(base error, reason string) error {
	if reason == "" {
		return base
	}
	return &reasonError{base: base, reason: reason}
}

// reasonError is a cancel cause that says why.
type reasonError struct {
	base   error
	reason string
}

func (e *reasonError) Error() string        { return e.base.Error() + ": " + e.reason }
func (e *reasonError) Unwrap() error        { return e.base }
func (e *reasonError) Is(target error) bool { return target == ErrCanceled }

// ShutdownReason is the cancel reason of the tasks that Manager.Shutdown
// cancels: it is on their records (TaskMeta.CancelReason) and in their
// cancelled events, so a shutdown reads differently from a user's cancel.
const ShutdownReason = "shutdown"

// StopReason is the cancel reason of the tasks that a run stopped by the
// user cancels (RunEnd with RunOutcome.Canceled) when the host gives no
// RunOutcome.Reason.
const StopReason = "stopped by the user"

// reasonOf returns the reason a cancel cause carries, if any: its own, or
// ShutdownReason for a shutdown.
func reasonOf(cause error) string {
	if e, ok := errors.AsType[*reasonError](cause); ok {
		return e.reason
	}
	if errors.Is(cause, ErrShutdown) {
		return ShutdownReason
	}
	return ""
}
