package bgopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask"
)

// The answers of calls that did not give a result or a model's mistake:
// fixed texts, so that nothing of the host's error (a store's message, a
// path) reaches the model.
const (
	textFailed = "tool call failed: the host could not run it"
	textNotRun = "tool call not run: another call of this step failed"
)

// ModelError marks err, returned by a tool of the host's own, as the
// model's mistake: the Answer methods then give its text to the model as
// the call's answer, for it to correct, instead of returning it. Use it
// for an error the model caused with its arguments (a name it chose that
// is taken, a value out of range). It returns nil for a nil err; the
// result matches err with errors.Is and errors.As, and has err's text.
// The other adapters (bganthropic, bgeino, bglangchain) recognise it
// too: any error with a method ModelMistake() bool that returns true is a
// model's mistake.
func ModelError(err error) error {
	if err == nil {
		return nil
	}
	return modelError{err}
}

// modelError is an error marked as the model's mistake by ModelError.
type modelError struct{ err error }

func (e modelError) Error() string      { return e.err.Error() }
func (e modelError) Unwrap() error      { return e.err }
func (e modelError) ModelMistake() bool { return true }

// IsModelMistake reports whether err, returned by a tool's Call, is the
// model's own mistake, answered to the model with its text rather than
// returned to the host: bgtask.IsModelMistake's errors (bad arguments, an
// unknown task, no current task), the errors a spawn gets for what the
// model chose (bgtask.ErrDuplicateName, bgtask.ErrInvalidArgument,
// bgtask.ErrLimit, bgtask.ErrFanOutLimit, bgtask.ErrDepthLimit), and any
// error marked with ModelError (or with a method ModelMistake() bool that
// returns true). An error of the call's ctx is never the model's.
func IsModelMistake(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var marked interface{ ModelMistake() bool }
	switch {
	case bgtask.IsModelMistake(err), errors.As(err, &marked) && marked.ModelMistake():
		return true
	}
	for _, target := range []error{bgtask.ErrDuplicateName, bgtask.ErrInvalidArgument, bgtask.ErrLimit, bgtask.ErrFanOutLimit, bgtask.ErrDepthLimit} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// pending is one tool call of a reply that the Toolset answers.
type pending struct {
	id   string // the provider's call id
	tool bgtask.Tool
	args json.RawMessage
}

// outcome is a call's answer: its text, and whether it is an error (a
// model's mistake, or a call the host could not run).
type outcome struct {
	text    string
	isError bool
}

// answer runs calls with the options of one answer and returns an outcome
// per call, in the calls' order, and the host's errors (nil if none).
//
// Each call runs with a ctx that carries its own lineage (the run and
// agent of the options or of ctx, and its call id), so what it spawns
// records the call. A call's host error stops the step: the calls not
// started yet are answered textNotRun, and the ones already running
// finish; every call gets an outcome all the same, so that no tool call of
// the reply is left without an answer.
//
// With parallel > 1 the calls run in goroutines that answer waits for
// before it returns; a panic in one is raised again here once all have
// returned (the first one, if several panicked).
func (s *Toolset) answer(ctx context.Context, calls []pending, opts []Option) ([]outcome, error) {
	cfg, err := s.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(calls) == 0 {
		return nil, nil
	}
	lineage, _ := bgtask.ToolCallFromContext(ctx)
	if cfg.runID != nil {
		lineage.RunID = *cfg.runID
	}
	if cfg.agentID != nil {
		lineage.AgentID = *cfg.agentID
	}
	out := make([]outcome, len(calls))
	errs := make([]error, len(calls))
	var failed atomic.Bool // a call failed with the host's error: start no more
	run := func(i int) {
		c := calls[i]
		call := lineage
		call.CallID = c.id
		out[i], errs[i] = runCall(bgtask.WithToolCall(ctx, call), c)
		if errs[i] != nil {
			failed.Store(true)
		}
	}

	if cfg.parallel == 1 || len(calls) == 1 {
		for i := range calls {
			if failed.Load() {
				out[i] = outcome{textNotRun, true}
				continue
			}
			run(i)
		}
		return out, errors.Join(errs...)
	}

	var (
		wg      sync.WaitGroup
		slots   = make(chan struct{}, cfg.parallel)
		panicMu sync.Mutex
		panics  []any // the calls' panics, first first
	)
	for i := range calls {
		slots <- struct{}{}
		if failed.Load() {
			<-slots
			out[i] = outcome{textNotRun, true}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			defer func() {
				if r := recover(); r != nil {
					failed.Store(true)
					panicMu.Lock()
					panics = append(panics, r)
					panicMu.Unlock()
				}
			}()
			run(i)
		})
	}
	wg.Wait()
	if len(panics) > 0 {
		panic(panics[0])
	}
	return out, errors.Join(errs...)
}

// runCall calls c's tool and returns its answer: the result, or the
// error's text when the error is the model's mistake. Any other error is
// returned, naming the tool and the call, with textFailed as the answer.
func runCall(ctx context.Context, c pending) (outcome, error) {
	res, err := c.tool.Call(ctx, c.args)
	switch {
	case err == nil:
		return outcome{text: string(res)}, nil
	case IsModelMistake(err):
		return outcome{err.Error(), true}, nil
	}
	return outcome{textFailed, true}, fmt.Errorf("bgopenai: %s (call %s): %w", c.tool.Name, c.id, err)
}
