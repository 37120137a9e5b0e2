package bganthropic

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/internal/toolcall"
)

// ModelError marks err, returned by a tool of the host's own, as the
// model's mistake: AnswerMessage then gives its text to the model as
// the call's answer, for it to correct, instead of returning it.
// It returns nil for a nil err; the result matches err with errors.Is and
// errors.As. Every adapter recognises it, and any error with a method
// ModelMistake() bool that returns true.
func ModelError(err error) error { return toolcall.MarkModelError(err) }

// IsModelMistake reports whether err, returned by a tool's Call, is the
// model's own mistake, answered to the model rather than returned to the
// host: see agent.IsModelMistake, which it extends with ModelError's marks
// and the errors a spawn gets for what the model chose.
func IsModelMistake(err error) bool { return toolcall.IsModelMistake(err) }

// defaultAnswer is how the Answer methods run calls with no option: one
// at a time, with the lineage of their ctx.
var defaultAnswer = toolcall.Config{Parallel: 1, Wrap: wrapHostError}

// answer runs calls with the options of one answer (the Toolset's, then
// opts) and returns an outcome per call, in the calls' order, and the
// host's errors (nil if none), as toolcall.Answer does; a bad option is
// returned with no outcomes and runs nothing.
func (s *Toolset) answer(ctx context.Context, calls []toolcall.Call, opts []Option) ([]toolcall.Outcome, error) {
	cfg, err := s.callConfig(opts)
	if err != nil {
		return nil, err
	}
	return toolcall.Answer(ctx, calls, cfg.answer)
}

// wrapHostError names the adapter, the tool and the call in a call's host
// error.
func wrapHostError(c toolcall.Call, err error) error {
	return fmt.Errorf("bganthropic: %s (tool_use %s): %w", c.Tool.Name, c.ID, err)
}
