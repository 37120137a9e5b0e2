// Package toolcall holds what the framework adapters (adapters/...) share
// to answer a model's tool calls: which errors are the model's mistakes,
// the mark a host puts on its own such errors, and the runner that
// answers the calls of one reply in order, with bounded parallelism.
package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// The answers of calls that did not give a result or a model's mistake:
// fixed texts, so that nothing of the host's error (a store's message, a
// path) reaches the model.
const (
	TextFailed = "tool call failed: the host could not run it"
	TextNotRun = "tool call not run: another call of this step failed"
)

// MarkModelError marks err as the model's mistake, for IsModelMistake. It
// returns nil for a nil err; the result matches err with errors.Is and
// errors.As, and has err's text.
func MarkModelError(err error) error {
	if err == nil {
		return nil
	}
	return modelError{err}
}

// modelError is an error marked as the model's mistake by MarkModelError.
type modelError struct{ err error }

func (e modelError) Error() string      { return e.err.Error() }
func (e modelError) Unwrap() error      { return e.err }
func (e modelError) ModelMistake() bool { return true }

// modelMistakes are the errors a spawn gets for what the model chose.
var modelMistakes = []error{bgtask.ErrDuplicateName, bgtask.ErrInvalidArgument, bgtask.ErrLimit, bgtask.ErrLimit, bgtask.ErrLimit}

// IsModelMistake reports whether err, returned by a tool's Call, is the
// model's own mistake: agent.IsModelMistake's errors, the errors a spawn
// gets for what the model chose (bgtask.ErrDuplicateName,
// bgtask.ErrInvalidArgument, bgtask.ErrLimit, bgtask.ErrLimit,
// bgtask.ErrLimit), and any error with a method ModelMistake() bool
// that returns true (MarkModelError's). An error of the call's ctx
// (context.Canceled, context.DeadlineExceeded) is never the model's, nor
// is nil.
func IsModelMistake(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var marked interface{ ModelMistake() bool }
	switch {
	case agent.IsModelMistake(err), errors.As(err, &marked) && marked.ModelMistake():
		return true
	}
	for _, target := range modelMistakes {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Call is one tool call of a reply to answer.
type Call struct {
	ID   string // the provider's call id
	Tool agent.Tool
	Args json.RawMessage
}

// Outcome is a call's answer: its text, and whether it is an error (a
// model's mistake, or a call the host could not run).
type Outcome struct {
	Text    string
	IsError bool
}

// Config is how Answer runs the calls of one reply. Its zero value runs
// them one after the other, with the lineage of Answer's ctx.
type Config struct {
	// Parallel is how many calls may run at once; 0 means 1. A negative
	// value is refused.
	Parallel int
	// RunID and AgentID, when not nil, replace the run and agent ids of
	// the bgtask.ToolCall on Answer's ctx in each call's lineage.
	RunID, AgentID *string
	// Wrap turns a call's host error (one that is no model's mistake) into
	// the error Answer returns for it, naming the adapter, the tool and
	// the call. Nil wraps it as "<tool> (call <id>): <err>".
	Wrap func(c Call, err error) error
}

// Validate refuses cfg's bad values, as an adapter's options set them,
// with an error matching bgtask.ErrInvalidArgument that names the option
// after prefix (the adapter's package name): a Parallel below 1
// (WithParallel; Answer itself takes 0 as 1), a blank RunID (WithRunID) or
// AgentID (WithAgentID). It returns nil for good values.
func (cfg Config) Validate(prefix string) error {
	if cfg.Parallel < 1 {
		return fmt.Errorf("%s: WithParallel(%d): at least one call at a time: %w", prefix, cfg.Parallel, bgtask.ErrInvalidArgument)
	}
	if cfg.RunID != nil && strings.TrimSpace(*cfg.RunID) == "" {
		return fmt.Errorf("%s: WithRunID: blank run id: %w", prefix, bgtask.ErrInvalidArgument)
	}
	if cfg.AgentID != nil && strings.TrimSpace(*cfg.AgentID) == "" {
		return fmt.Errorf("%s: WithAgentID: blank agent id: %w", prefix, bgtask.ErrInvalidArgument)
	}
	return nil
}

// Answer runs calls with cfg and returns an outcome per call, in the
// calls' order, and the host's errors joined (nil if none). With no calls
// it returns nil, nil; a negative cfg.Parallel is refused with an error
// matching bgtask.ErrInvalidArgument, and no call runs.
//
// Each call runs with a ctx that carries its own bgtask.ToolCall (the run
// and agent ids of cfg or of ctx, and its call id), so what it spawns
// records the call. A call that returns no error is answered with its
// result, one whose error is the model's mistake (see IsModelMistake) with
// the error's text and IsError. Any other error is the host's: the call is
// answered TextFailed and the error, wrapped by cfg.Wrap, returned. A host
// error stops the step: the calls not started yet are answered TextNotRun,
// and the ones already running finish; every call gets an outcome all the
// same, so that no tool call of the reply is left without an answer.
//
// With Parallel > 1 the calls run in goroutines that Answer waits for
// before it returns; a panic in one stops the calls not started yet, and
// is raised again in Answer's goroutine once all have returned (the first
// one, if several panicked). With Parallel 1 a panic goes up at once.
func Answer(ctx context.Context, calls []Call, cfg Config) ([]Outcome, error) {
	if cfg.Parallel < 0 {
		return nil, fmt.Errorf("toolcall: parallel %d: at least one call at a time: %w", cfg.Parallel, bgtask.ErrInvalidArgument)
	}
	if len(calls) == 0 {
		return nil, nil
	}
	lineage, _ := bgtask.ToolCallFromContext(ctx)
	if cfg.RunID != nil {
		lineage.RunID = *cfg.RunID
	}
	if cfg.AgentID != nil {
		lineage.AgentID = *cfg.AgentID
	}
	wrap := cfg.Wrap
	if wrap == nil {
		wrap = func(c Call, err error) error { return fmt.Errorf("%s (call %s): %w", c.Tool.Name, c.ID, err) }
	}
	out := make([]Outcome, len(calls))
	errs := make([]error, len(calls))
	var failed atomic.Bool // a call failed with the host's error: start no more
	run := func(i int) {
		c := calls[i]
		call := lineage
		call.CallID = c.ID
		out[i], errs[i] = runCall(bgtask.WithToolCall(ctx, call), c, wrap)
		if errs[i] != nil {
			failed.Store(true)
		}
	}

	if cfg.Parallel <= 1 || len(calls) == 1 {
		for i := range calls {
			if failed.Load() {
				out[i] = Outcome{TextNotRun, true}
				continue
			}
			run(i)
		}
		return out, errors.Join(errs...)
	}

	// Not errgroup.SetLimit: its Go waits for a slot inside, so a call
	// could start after another failed while it waited; here the check is
	// made once the slot is taken (decision 567).
	var (
		wg      sync.WaitGroup
		slots   = make(chan struct{}, cfg.Parallel)
		panicMu sync.Mutex // guards panics
		panics  []any      // the calls' panics, first first
	)
	for i := range calls {
		slots <- struct{}{}
		if failed.Load() {
			<-slots
			out[i] = Outcome{TextNotRun, true}
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
// returned, wrapped by wrap, with TextFailed as the answer.
func runCall(ctx context.Context, c Call, wrap func(Call, error) error) (Outcome, error) {
	res, err := c.Tool.Call(ctx, c.Args)
	switch {
	case err == nil:
		return Outcome{Text: string(res)}, nil
	case IsModelMistake(err):
		return Outcome{err.Error(), true}, nil
	}
	return Outcome{TextFailed, true}, wrap(c, err)
}
