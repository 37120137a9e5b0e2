package bga2a

import (
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

var (
	// ErrNoOwner is returned by New when neither WithOwner nor WithOwnerFunc
	// is given: the server never guesses whom a request acts for.
	ErrNoOwner = errors.New("bga2a: no owner: use WithOwner or WithOwnerFunc")
	// ErrClosed is the error of every request after Server.Close.
	ErrClosed = errors.New("bga2a: server closed")
)

// taskErr maps a bgtask error about task id to its A2A error. Another
// owner's task is not found, exactly as an unknown id.
func taskErr(id string, err error) error {
	switch {
	case errors.Is(err, bgtask.ErrNotFound):
		return fmt.Errorf("task %s: %w", id, a2a.ErrTaskNotFound)
	case errors.Is(err, bgtask.ErrClosed):
		return fmt.Errorf("%w: %w", a2a.ErrServerError, err)
	}
	return err
}

// terminalErr is the error of a message to an ended task: an
// unsupported operation, as the A2A specification names it (a task in a
// terminal state cannot be restarted) and the A2A JavaScript SDK answers.
func terminalErr(id string, st bgtype.Status) error {
	return fmt.Errorf("task %s is in a terminal state %q and takes no more messages: %w", id, State(st), a2a.ErrUnsupportedOperation)
}

// spawnErr maps a spawn's error: a full concurrency limit or a closed
// Manager is the server's state, not the request's fault.
func spawnErr(err error) error {
	switch {
	case errors.Is(err, bgtask.ErrLimit), errors.Is(err, bgtask.ErrClosed):
		return fmt.Errorf("%w: %w", a2a.ErrServerError, err)
	}
	return err
}
