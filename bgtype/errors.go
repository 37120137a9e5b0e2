package bgtype

import "errors"

// Errors of the records: check them with [errors.Is].
var (
	// ErrInvalidOwner is returned when an owner id is empty or blank.
	ErrInvalidOwner = errors.New("bgtask: owner id is empty")
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
