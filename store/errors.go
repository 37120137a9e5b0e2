package store

import "errors"

var (
	// ErrInvalidAction is returned by a Store for an action it cannot apply:
	// an unknown op, a task without an id or status, or a task of another owner.
	ErrInvalidAction = errors.New("bgtask: invalid state action")
)
