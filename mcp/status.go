package bgmcp

import "github.com/bgtask/bgtask"

// MCP task statuses (revision 2025-11-25).
const (
	statusWorking       = "working"
	statusInputRequired = "input_required"
	statusCompleted     = "completed"
	statusFailed        = "failed"
	statusCancelled     = "cancelled"
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
func StatusOf(st bgtask.TaskStatus, isError bool) string {
	switch st {
	case bgtask.StatusQueued, bgtask.StatusRunning:
		return statusWorking
	case bgtask.StatusAwaitingInput:
		return statusInputRequired
	case bgtask.StatusCompleted:
		if isError {
			return statusFailed
		}
		return statusCompleted
	case bgtask.StatusCancelled:
		return statusCancelled
	}
	return statusFailed
}
