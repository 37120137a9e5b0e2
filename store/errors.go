package store

import "errors"

var (
	// ErrInvalidAction is returned by a Store for an action it cannot apply:
	// an unknown op, a task without an id or status, or a task of another owner.
	ErrInvalidAction = errors.New("bgtask: invalid state action")
	// ErrRunHeld is returned by RunLeaser.OpenRun while another live
	// runtime instance holds a run of the owner open. The runtime reports
	// it as its own ErrRunOpen.
	ErrRunHeld = errors.New("bgtask: a run of the owner is open on another instance")
)
