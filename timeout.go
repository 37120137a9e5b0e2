package bgtask

import (
	"errors"
	"fmt"
	"time"
)

// ErrTimeout is the cause of a task's context when its time ran out
// (WithTimeout, WithDeadline), and is matched by the *TaskError that Wait
// returns for a task that failed that way.
var ErrTimeout = errors.New("bgtask: task timed out")

// WithTimeout ends the task's time d after its spawn (time spent queued
// counts): its context then ends with a cause matching ErrTimeout, and if
// its function returns an error, the task ends failed with the error kind
// KindTimeout. A function that returns a value anyway completes. A later
// WithTimeout or WithDeadline replaces an earlier one; d <= 0 makes the
// spawn fail with an error matching ErrInvalidArgument.
func WithTimeout(d time.Duration) SpawnOption {
	return func(c *spawnConfig) { c.timeout, c.deadline, c.timed = d, time.Time{}, timedBy(1) }
}

// WithDeadline is WithTimeout with the time at which the task's time ends.
// A zero t makes the spawn fail with an error matching ErrInvalidArgument;
// a t already past starts the task with its context ended.
func WithDeadline(t time.Time) SpawnOption {
	return func(c *spawnConfig) { c.timeout, c.deadline, c.timed = 0, t, timedBy(2) }
}

// timedBy says which of WithTimeout (1) and WithDeadline (2) was given last.
type timedBy uint8

// deadlineOf returns the task's deadline (zero for none) and the cause its
// context ends with then, or why the options are invalid.
func (c *spawnConfig) deadlineOf(created time.Time) (time.Time, error, error) {
	switch c.timed {
	case 1:
		if c.timeout <= 0 {
			return time.Time{}, nil, invalidArgument("timeout %v is not positive", c.timeout)
		}
		return created.Add(c.timeout), &timeoutError{c.timeout}, nil
	case 2:
		if c.deadline.IsZero() {
			return time.Time{}, nil, invalidArgument("deadline is zero")
		}
		return c.deadline, &timeoutError{}, nil
	}
	return time.Time{}, nil, nil
}

// timeoutError is the cause of a task context whose time ran out.
type timeoutError struct{ timeout time.Duration }

func (e *timeoutError) Error() string {
	if e.timeout > 0 {
		return fmt.Sprintf("bgtask: task timed out after %v", e.timeout)
	}
	return "bgtask: task timed out: its deadline passed"
}

func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }
