package bga2a

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask/bgtype"
)

// State maps a bgtask status to the A2A task state a client sees:
//
//	queued          submitted
//	running         working
//	awaiting_input  input-required
//	completed       completed
//	failed          failed
//	interrupted     failed (the process that ran the task is gone)
//	cancelled       canceled
//
// Any other value maps to "unknown".
func State(s bgtype.Status) a2a.TaskState {
	switch s {
	case bgtype.StatusQueued:
		return a2a.TaskStateSubmitted
	case bgtype.StatusRunning:
		return a2a.TaskStateWorking
	case bgtype.StatusAwaitingInput:
		return a2a.TaskStateInputRequired
	case bgtype.StatusCompleted:
		return a2a.TaskStateCompleted
	case bgtype.StatusFailed, bgtype.StatusInterrupted:
		return a2a.TaskStateFailed
	case bgtype.StatusCanceled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateUnknown
}
