package bgtask

import (
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// Errors returned by the Manager and its Owner views. Check them with
// [errors.Is]: most are returned wrapped with the offending value.
var (
	// ErrNotFound is returned for an unknown task id, and for the task of
	// another owner when asked through an Owner view.
	ErrNotFound = bgtype.ErrNotFound
	// ErrClosed is returned by every call on a Manager after Shutdown (or Stop) began.
	ErrClosed = bgtype.ErrClosed
	// ErrInvalidArgument is matched by the error of a call given a value it
	// cannot take: a nil task function, a task name that is blank, too long,
	// reserved (parent, self, all, broadcast), has surrounding spaces or
	// control characters, or starts with the id prefix "task_"; an unknown
	// wake policy; an empty event type or a payload that cannot be encoded
	// as JSON (Task.Emit); a blank input prompt; an empty run id; an
	// invalid Manager option given to New (a negative limit or cap, a nil
	// store). The text after "bgtask: invalid argument: " says which and
	// why. Nothing was changed.
	ErrInvalidArgument = errors.New("bgtask: invalid argument")
	// ErrInvalidOwner is returned when an owner id is empty or blank.
	ErrInvalidOwner = bgtype.ErrInvalidOwner
	// ErrDuplicateName is returned when the owner already has a non-terminal
	// task with the same name.
	ErrDuplicateName = errors.New("bgtask: a non-terminal task with this name already exists")
	// ErrParentNotFound is returned when a spawn names a parent task that does
	// not exist or that the owner may not see.
	ErrParentNotFound = errors.New("bgtask: parent task not found")
	// ErrDepthLimit is returned when a spawn would nest deeper than Limits.MaxDepth.
	ErrDepthLimit = errors.New("bgtask: lineage depth limit reached")
	// ErrFanOutLimit is returned when a parent already has Limits.MaxChildren
	// live children.
	ErrFanOutLimit = errors.New("bgtask: fan-out limit reached")
	// ErrLimit is returned when a concurrency limit is full and the Manager
	// was not configured to queue (see Limits.QueueWhenFull).
	ErrLimit = errors.New("bgtask: concurrency limit reached")
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
	// ErrTaskEnded is returned by Emit once the task function has returned.
	ErrTaskEnded = errors.New("bgtask: task has ended")
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
	ErrInstanceLost = bgtype.ErrInstanceLost
)

// StatusError reports that a task has already reached a terminal status.
// It matches ErrTerminal with [errors.Is].
type StatusError struct {
	TaskID string
	Status bgtype.Status
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("bgtask: task %s already %s", e.TaskID, e.Status)
}

// Is reports whether target is ErrTerminal.
func (e *StatusError) Is(target error) bool { return target == ErrTerminal }

// invalidArgument returns an error matching ErrInvalidArgument that says
// what was wrong.
func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// Argument errors made once, for the calls that return them without a value.
var (
	errNilFunc     = invalidArgument("task function is nil")
	errEmptyRun    = invalidArgument("run id is empty")
	errBlankPrompt = invalidArgument("input request prompt is blank")
	errEmptyEvent  = invalidArgument("empty event type")
)
