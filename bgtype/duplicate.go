package bgtype

import (
	"errors"
	"fmt"
)

// ErrDuplicateKey is matched by the error a Store returns when a commit
// would insert a record whose idempotency key the owner already uses; the
// error is a *DuplicateKeyError naming the record that has it.
var ErrDuplicateKey = errors.New("bgtask: idempotency key already used")

// DuplicateKeyError is a Store's report that the owner already has a record
// with this idempotency key: TaskID is that record's id (a task of the same
// owner, so it reveals nothing of another). It matches ErrDuplicateKey.
type DuplicateKeyError struct {
	Key    string
	TaskID string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("bgtask: idempotency key %q already used by task %s", e.Key, e.TaskID)
}

// Is reports whether target is ErrDuplicateKey.
func (e *DuplicateKeyError) Is(target error) bool { return target == ErrDuplicateKey }
