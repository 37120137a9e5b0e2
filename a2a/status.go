package bga2a

import (
	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
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
func State(s bgtask.TaskStatus) a2a.TaskState {
	switch s {
	case bgtask.StatusQueued:
		return a2a.TaskStateSubmitted
	case bgtask.StatusRunning:
		return a2a.TaskStateWorking
	case bgtask.StatusAwaitingInput:
		return a2a.TaskStateInputRequired
	case bgtask.StatusCompleted:
		return a2a.TaskStateCompleted
	case bgtask.StatusFailed, bgtask.StatusInterrupted:
		return a2a.TaskStateFailed
	case bgtask.StatusCancelled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateUnknown
}
