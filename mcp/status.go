package bgmcp

import "github.com/bgtask/bgtask/bgtype"

// MCP task statuses (revision 2025-11-25).
const (
	statusWorking       = "working"
	statusInputRequired = "input_required"
	statusCompleted     = "completed"
	statusFailed        = "failed"
	statusCanceled      = "cancelled"
)

// StatusOf maps a bgtask status to the MCP task status a client sees:
//
//	queued, running  -> working
//	awaiting_input   -> input_required
//	completed        -> completed, or failed when isError (the tool's result has isError)
//	failed           -> failed
//	interrupted      -> failed (the process that ran it stopped)
//	cancelled        -> cancelled
//
// An unknown status maps to failed. It is a pure function.
func StatusOf(st bgtype.Status, isError bool) string {
	switch st {
	case bgtype.StatusQueued, bgtype.StatusRunning:
		return statusWorking
	case bgtype.StatusAwaitingInput:
		return statusInputRequired
	case bgtype.StatusCompleted:
		if isError {
			return statusFailed
		}
		return statusCompleted
	case bgtype.StatusCanceled:
		return statusCanceled
	}
	return statusFailed
}
