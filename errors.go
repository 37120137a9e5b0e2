package bgtask

import (
	"errors"
	"fmt"
	"slices"

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
	ErrInvalidArgument = bgtype.ErrInvalidArgument
	// ErrDuplicateName is returned when the owner already has a non-terminal
	// task with the same name.
	ErrDuplicateName = errors.New("bgtask: a non-terminal task with this name already exists")
	// ErrLimit is returned when a concurrency limit is full and the Manager
	// was not configured to queue (see Limits.QueueWhenFull), and matched
	// when a spawn would nest deeper than Limits.MaxDepth or give a parent
	// more than Limits.MaxChildren live children (the text says which).
	ErrLimit = errors.New("bgtask: concurrency limit reached")
	// ErrTerminal is matched by a *StatusError when a task has already ended.
	ErrTerminal = errors.New("bgtask: task already terminal")
	// ErrNotSubAgent is returned when a message is sent to a plain task,
	// which has no inbox (only a sub-agent has one).
	ErrNotSubAgent = errors.New("bgtask: task has no inbox (not a sub-agent)")
	// ErrInboxClosed is returned when sending to a closed Inbox.
	ErrInboxClosed = errors.New("bgtask: inbox closed")
	// ErrNotLive is returned by Wait for a non-terminal task that this
	// Manager does not run (restored from a store, or run by another process).
	ErrNotLive = errors.New("bgtask: task is not running in this manager")
	// ErrElsewhere is matched by the error of Wait, WaitSettled, Send and
	// an answer to an input request for a live task that another live
	// process runs, when the store cannot carry the call there (two
	// processes on one SQLite file; pgstore carries them). The error of a
	// wait matches ErrNotLive too, that of a send ErrInboxClosed: nothing
	// here can finish the task or reach its inbox.
	ErrElsewhere = errors.New("bgtask: task runs in another process")
	// ErrInputPending is no longer returned: a task may have several input
	// requests open at once (Task.RequestInput). It stays for the code that
	// tests for it.
	ErrInputPending = errors.New("bgtask: task already awaits input")
	// ErrNoInputRequest is returned when a Message answers (InReplyTo) a
	// request the task does not have open.
	ErrNoInputRequest = errors.New("bgtask: task has no such open input request")
)

// Cancellation causes, read with [context.Cause] inside a task.
var (
	// ErrCanceled is the cause when a task is cancelled by id or by owner.
	ErrCanceled = errors.New("bgtask: task cancelled")
	// ErrShutdown is the cause when the Manager shuts down.
	ErrShutdown = errors.New("bgtask: manager shut down")
	// ErrInstanceLost is the cause when a shared store finds that this
	// runtime instance lost its registration (its heartbeat lapsed and
	// another instance reaped its tasks): see Manager.Runtime.
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

// Errors the calls above return for cases a caller handles like another:
// each keeps its own text and matches (errors.Is) the exported value it
// belongs to.
var (
	errDepthLimit     = &folded{"bgtask: lineage depth limit reached", []error{ErrLimit}}      // a spawn nesting deeper than Limits.MaxDepth
	errFanOutLimit    = &folded{"bgtask: fan-out limit reached", []error{ErrLimit}}            // a parent already at Limits.MaxChildren live children
	errParentNotFound = &folded{"bgtask: parent task not found", []error{ErrNotFound}}         // a spawn naming a parent the owner may not see
	errNotOwner       = &folded{"bgtask: caller does not own this task", []error{ErrNotFound}} // Manager.Send naming another owner's task
	errTaskEnded      = &folded{"bgtask: task has ended", []error{ErrTerminal}}                // Emit once the task function returned
	errParentCanceled = &folded{"bgtask: parent task cancelled", []error{ErrCanceled}}         // the cancel cause of a task whose ancestor was canceled
	errRunCanceled    = &folded{"bgtask: run cancelled", []error{ErrCanceled}}                 // the cancel cause of a canceled run's tasks, and the error of a spawn into it
)

// folded is an error that keeps its own text and matches the exported
// errors it belongs to.
type folded struct {
	msg   string
	kinds []error
}

func (e *folded) Error() string { return e.msg }

// Is reports whether target is one of the errors e belongs to.
func (e *folded) Is(target error) bool { return slices.Contains(e.kinds, target) }

// TaskError is the error Wait returns for a failed task, beside its
// record: the task's id, its error kind and the text of its error. It
// matches ErrTimeout (errors.Is) when Kind is KindTimeout.
type TaskError struct {
	TaskID  string
	Kind    bgtype.ErrorKind
	Message string
}

// Error returns "bgtask: task <id> failed (<kind>): <message>".
func (e *TaskError) Error() string {
	return fmt.Sprintf("bgtask: task %s failed (%s): %s", e.TaskID, e.Kind, e.Message)
}

// Is reports whether target is ErrTimeout and the task timed out.
func (e *TaskError) Is(target error) bool {
	return target == ErrTimeout && e.Kind == bgtype.KindTimeout
}

// failedError returns meta's *TaskError when it is a failed record.
func failedError(meta *bgtype.TaskMeta) error {
	if meta.Status != bgtype.StatusFailed {
		return nil
	}
	return &TaskError{TaskID: meta.ID, Kind: meta.ErrorKind, Message: meta.Error}
}
