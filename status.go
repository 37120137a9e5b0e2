package bgtask

import (
	"encoding/json"
	"fmt"
)

// TaskStatus is where a task is in its life. The zero value is not a valid
// status. Statuses only move forward:
//
//	queued ──► running ◄──► awaiting_input
//	   │          │               │
//	   │          └───────────────┴──► completed | failed | cancelled | interrupted
//	   └──────────────────────────────► cancelled | interrupted
//
// Terminal statuses are final: the reducer drops any later update that asks
// for another status (see [ApplyAction]).
type TaskStatus string

const (
	// StatusQueued: spawned while a concurrency limit was full and the Manager
	// queues (WithQueueWhenFull). The task function has not started. The
	// Manager moves it to running when a slot frees, or to cancelled when it
	// is cancelled first.
	StatusQueued TaskStatus = "queued"
	// StatusRunning: the task function is running. It leaves this status
	// when the function returns (completed, failed or cancelled), or when
	// another runtime instance finds its process gone (interrupted).
	StatusRunning TaskStatus = "running"
	// StatusAwaitingInput: the running function asked its owner for input
	// (Task.RequestInput) and waits for the answer; the record's Input holds
	// the request. The answer (a Message whose InReplyTo is the request id)
	// moves it back to running. It ends like a running task.
	StatusAwaitingInput TaskStatus = "awaiting_input"
	// StatusCompleted (terminal): the function returned a nil error. The
	// record's Result holds the JSON of the returned value.
	StatusCompleted TaskStatus = "completed"
	// StatusFailed (terminal): the function returned an error that is not a
	// cancellation, or panicked. The record's Error holds the text.
	StatusFailed TaskStatus = "failed"
	// StatusCancelled (terminal): the task was cancelled and its function
	// returned an error matching context.Canceled or the cancel cause, or it
	// was cancelled while queued.
	StatusCancelled TaskStatus = "cancelled"
	// StatusInterrupted (terminal): the runtime instance that ran the task is
	// gone, so the function will never report. Set at restore or by a reaper;
	// closures are never re-run.
	StatusInterrupted TaskStatus = "interrupted"
)

// Statuses returns every status in lifecycle order.
func Statuses() []TaskStatus {
	return []TaskStatus{StatusQueued, StatusRunning, StatusAwaitingInput, StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted}
}

// String returns the lowercase name.
func (s TaskStatus) String() string { return string(s) }

// IsTerminal reports whether s is completed, failed, cancelled or interrupted.
func (s TaskStatus) IsTerminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted:
		return true
	}
	return false
}

// Valid reports whether s is one of the statuses this package defines.
func (s TaskStatus) Valid() bool { return s.rank() >= 0 }

// rank orders statuses so the reducer can refuse moves backwards.
func (s TaskStatus) rank() int {
	switch s {
	case StatusQueued:
		return 0
	case StatusRunning, StatusAwaitingInput:
		return 1
	case StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted:
		return 2
	}
	return -1
}

// UnmarshalJSON accepts only known statuses, so a corrupt stored row is an
// error rather than a task in a state nothing handles.
func (s *TaskStatus) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return statusError{fmt.Sprintf("status: %v", err)}
	}
	if !TaskStatus(str).Valid() {
		return statusError{fmt.Sprintf("unknown status %q", str)}
	}
	*s = TaskStatus(str)
	return nil
}

// statusError is a status that cannot be decoded. It matches ErrCorrupt
// without repeating its text, since callers add the task it belongs to.
type statusError struct{ msg string }

func (e statusError) Error() string        { return e.msg }
func (e statusError) Is(target error) bool { return target == ErrCorrupt }
