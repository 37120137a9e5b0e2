package bglangchain

import "github.com/bgtask/bgtask/internal/toolcall"

// ModelError marks err, returned by a tool of the host's own, as the
// model's mistake: Call then returns its text as the call's
// result, for the model to correct, instead of the error.
// It returns nil for a nil err; the result matches err with errors.Is and
// errors.As. Every adapter recognises it, and any error with a method
// ModelMistake() bool that returns true.
func ModelError(err error) error { return toolcall.MarkModelError(err) }

// IsModelMistake reports whether err, returned by a tool's Call, is the
// model's own mistake, answered to the model rather than returned to the
// host: see agent.IsModelMistake, which it extends with ModelError's marks
// and the errors a spawn gets for what the model chose.
func IsModelMistake(err error) bool { return toolcall.IsModelMistake(err) }
