package agent

import (
	"errors"

	"github.com/bgtask/bgtask"
)

// IsModelMistake reports whether err, returned by a Tool's Call, is the
// model's own mistake, one it can mend on its next turn: bad arguments
// (ErrToolArguments), a task id that does not exist or is another owner's
// (bgtype.ErrNotFound), a cancel with no current task (ErrNoCurrentTask). A host
// hands such an error back to the model as the tool's result, with its
// exact text. Any other error (bgtask.ErrClosed, a Store failure, the call's ctx
// ending) is the host's to handle; nil is no mistake.
func IsModelMistake(err error) bool {
	return errors.Is(err, ErrToolArguments) || errors.Is(err, bgtask.ErrNotFound) || errors.Is(err, ErrNoCurrentTask)
}
