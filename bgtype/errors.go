package bgtype

import (
	"errors"
	"unicode"
)

// Errors of the records: check them with [errors.Is].
var (
	// ErrClosed is matched by the error of a call on a Manager after
	// Shutdown began, and by a store's after it was closed.
	ErrClosed = errors.New("bgtask: manager closed")
	// ErrInstanceLost is the cancel cause when a shared store finds that
	// its runtime instance lost its registration (its heartbeat lapsed and
	// another instance reaped its tasks), and matched by the store's errors
	// from then on.
	ErrInstanceLost = errors.New("bgtask: runtime instance lost its registration")
	// ErrInvalidArgument is matched by the error of a call given a value it
	// cannot take; the text after "bgtask: invalid argument: " says which
	// and why. Nothing was changed.
	ErrInvalidArgument = errors.New("bgtask: invalid argument")
	// ErrInvalidOwner is returned for an empty or blank owner id (by the
	// runtime and by every store). It matches ErrInvalidArgument.
	ErrInvalidOwner error = ownerError{}
	// ErrNotFound is returned for an unknown task id, and for the task of
	// another owner when asked through an Owner view.
	ErrNotFound = errors.New("bgtask: task not found")
	// ErrInvalidStatus is returned for a status filter this package does not know.
	ErrInvalidStatus = errors.New("bgtask: invalid task status")
	// ErrCorrupt is returned when stored or decoded metadata is not valid.
	ErrCorrupt = errors.New("bgtask: corrupt task metadata")
	// ErrInvalidEvent is returned when an Event cannot be encoded or decoded
	// as JSON (an unknown kind, a missing task id).
	ErrInvalidEvent = errors.New("bgtask: invalid event")
)

// ValidOwner reports whether id can name an owner (or a run): it has a
// character that is not white space. Every store and the runtime refuse
// other ids with ErrInvalidOwner.
func ValidOwner(id string) bool {
	for _, r := range id {
		if !unicode.IsSpace(r) {
			return true
		}
	}
	return false
}

// ownerError is ErrInvalidOwner: its own text, and a kind of invalid
// argument.
type ownerError struct{}

func (ownerError) Error() string { return "bgtask: owner id is empty" }

// Is reports whether target is ErrInvalidArgument.
func (ownerError) Is(target error) bool { return target == ErrInvalidArgument }
