package bgtask

import (
	"errors"
	"fmt"
)

// Errors returned by the Manager and its Owner views. Check them with
// [errors.Is]: most are returned wrapped with the offending value.
var (
	// ErrClosed is returned by every call on a Manager after Shutdown began.
	ErrClosed = errors.New("bgtask: manager closed")
	// ErrInvalidOwner is returned when an owner id is empty or blank.
	ErrInvalidOwner = errors.New("bgtask: owner id is empty")
	// ErrNilFunc is returned when Spawn is given a nil function.
	ErrNilFunc = errors.New("bgtask: task function is nil")
	// ErrInvalidName is returned for a task name that is blank, too long,
	// has surrounding spaces or control characters, or starts with the id
	// prefix "task_".
	ErrInvalidName = errors.New("bgtask: invalid task name")
	// ErrReservedName is returned for the names parent, self, all and broadcast.
	ErrReservedName = errors.New("bgtask: reserved task name")
	// ErrDuplicateName is returned when the owner already has a non-terminal
	// task with the same name.
	ErrDuplicateName = errors.New("bgtask: a non-terminal task with this name already exists")
	// ErrParentNotFound is returned when a spawn names a parent task that does
	// not exist or that the owner may not see.
	ErrParentNotFound = errors.New("bgtask: parent task not found")
	// ErrDepthLimit is returned when a spawn would nest deeper than WithMaxDepth.
	ErrDepthLimit = errors.New("bgtask: lineage depth limit reached")
	// ErrFanOutLimit is returned when a parent already has WithMaxChildren
	// live children.
	ErrFanOutLimit = errors.New("bgtask: fan-out limit reached")
	// ErrLimit is returned when a concurrency limit is full and the Manager
	// was not configured to queue (see WithQueueWhenFull).
	ErrLimit = errors.New("bgtask: concurrency limit reached")
	// ErrNotFound is returned for an unknown task id, and for the task of
	// another owner when asked through an Owner view.
	ErrNotFound = errors.New("bgtask: task not found")
	// ErrNotOwner is returned by Manager.Send when the task belongs to
	// another owner than the caller claims. Owner views report ErrNotFound
	// instead, so that another owner's task is never revealed.
	ErrNotOwner = errors.New("bgtask: caller does not own this task")
	// ErrTerminal is matched by a *StatusError when a task has already ended.
	ErrTerminal = errors.New("bgtask: task already terminal")
	// ErrNotSubAgent is returned when a message is sent to a plain task.
	ErrNotSubAgent = errors.New("bgtask: task has no inbox (not a sub-agent)")
	// ErrInboxClosed is returned when sending to a closed Inbox.
	ErrInboxClosed = errors.New("bgtask: inbox closed")
	// ErrNotLive is returned by Wait for a non-terminal task that this
	// Manager does not run (restored from a store, or run by another process).
	ErrNotLive = errors.New("bgtask: task is not running in this manager")
	// ErrInvalidEvent is returned by Emit for an empty event type.
	ErrInvalidEvent = errors.New("bgtask: invalid event")
	// ErrInvalidPayload is returned by Emit when the payload cannot be
	// encoded as JSON.
	ErrInvalidPayload = errors.New("bgtask: payload is not JSON-encodable")
	// ErrTaskEnded is returned by Emit once the task function has returned.
	ErrTaskEnded = errors.New("bgtask: task has ended")
	// ErrInvalidAction is returned by a Store for an action it cannot apply:
	// an unknown op, a task without an id or status, or a task of another owner.
	ErrInvalidAction = errors.New("bgtask: invalid state action")
	// ErrInvalidStatus is returned for a status filter this package does not know.
	ErrInvalidStatus = errors.New("bgtask: invalid task status")
	// ErrInvalidRun is returned by CancelRun for an empty run id.
	ErrInvalidRun = errors.New("bgtask: run id is empty")
	// ErrCorrupt is returned when stored or decoded metadata is not valid.
	ErrCorrupt = errors.New("bgtask: corrupt task metadata")
	// ErrInvalidWake is returned by a spawn given an unknown WakePolicy.
	ErrInvalidWake = errors.New("bgtask: invalid wake policy")
	// ErrInvalidInput is returned by Task.RequestInput for a blank prompt.
	ErrInvalidInput = errors.New("bgtask: input request prompt is empty")
	// ErrInputPending is returned by Task.RequestInput while an earlier
	// request of the same task waits for its answer.
	ErrInputPending = errors.New("bgtask: task already awaits input")
	// ErrNoInputRequest is returned when a Message answers (InReplyTo) a
	// request the task does not have open.
	ErrNoInputRequest = errors.New("bgtask: task has no such open input request")
)

// Cancellation causes, read with [context.Cause] inside a task.
var (
	// ErrCancelled is the cause when a task is cancelled by id or by owner.
	ErrCancelled = errors.New("bgtask: task cancelled")
	// ErrParentCancelled is the cause when a cancel cascades from an ancestor.
	ErrParentCancelled = errors.New("bgtask: parent task cancelled")
	// ErrRunCancelled is the cause when the task's run is cancelled, and the
	// error of a spawn into a run that was already cancelled.
	ErrRunCancelled = errors.New("bgtask: run cancelled")
	// ErrShutdown is the cause when the Manager shuts down.
	ErrShutdown = errors.New("bgtask: manager shut down")
	// ErrInstanceLost is the cause when a shared store finds that this
	// runtime instance lost its registration (its heartbeat lapsed and
	// another instance reaped its tasks): see Manager.CancelAll.
	ErrInstanceLost = errors.New("bgtask: runtime instance lost its registration")
)

// StatusError reports that a task has already reached a terminal status.
// It matches ErrTerminal with [errors.Is].
type StatusError struct {
	TaskID string
	Status TaskStatus
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("bgtask: task %s already %s", e.TaskID, e.Status)
}

// Is reports whether target is ErrTerminal.
func (e *StatusError) Is(target error) bool { return target == ErrTerminal }
