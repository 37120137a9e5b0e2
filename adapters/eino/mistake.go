package bgeino

import "github.com/bgtask/bgtask/internal/toolcall"

// ModelError marks err, returned by a tool of the host's own, as the
// model's mistake: InvokableRun then returns its text as the call's
// result, for the model to correct, instead of the error. Use it
// for an error the model caused with its arguments (a name it chose that
// is taken, a value out of range). It returns nil for a nil err; the
// result matches err with errors.Is and errors.As, and has err's text.
// The other adapters (bgopenai, bganthropic, bglangchain) recognise it
// too: any error with a method ModelMistake() bool that returns true is a
// model's mistake.
func ModelError(err error) error { return toolcall.MarkModelError(err) }

// IsModelMistake reports whether err, returned by a tool's Call, is the
// model's own mistake, given to the model as the call's result rather
// than returned as InvokableRun's error: agent.IsModelMistake's errors (bad arguments, an
// unknown task, no current task), the errors a spawn gets for what the
// model chose (bgtask.ErrDuplicateName, bgtask.ErrInvalidArgument,
// bgtask.ErrLimit, bgtask.ErrLimit, bgtask.ErrLimit), and any
// error marked with ModelError (or with a method ModelMistake() bool that
// returns true). An error of the call's ctx is never the model's.
func IsModelMistake(err error) bool { return toolcall.IsModelMistake(err) }
