package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// DefaultMaxSteps bounds a run whose Config sets no MaxSteps.
const DefaultMaxSteps = 64

// Config is one run of the loop.
type Config struct {
	Model Model  // required
	Tools []Tool // what the model may call
	// Hooks connects background tasks, usually a *agent.Plugin. Nil runs
	// a plain loop.
	Hooks   LoopHooks
	RunID   string // required with Hooks: the run's lineage and CancelRun key
	AgentID string
	// SubAgent: at a natural end with work pending, wait for it on the
	// inbox and go on, instead of ending "waiting".
	SubAgent bool
	// Decisions answers suspended tool calls. Nil: a suspension ends the run
	// "waiting"/"suspended".
	Decisions <-chan Decision
	MaxSteps  int // default DefaultMaxSteps
	// OnStep, if set, hears of each step once its tool calls ran, on the
	// loop's goroutine.
	OnStep func(Step)
}

// Step is what happened in one step, for OnStep.
type Step struct {
	Index     int
	Delivered []agent.PromptMessage // background events delivered since the previous inference
	Response  Response
}

// Run statuses and reasons, as the reference systems name them.
const (
	StatusDone    = "done"
	StatusWaiting = "waiting"

	ReasonNatural       = "natural"
	ReasonAwaitingTasks = "awaiting_tasks"
	ReasonSuspended     = "suspended"
	ReasonCanceled      = "cancelled"
	ReasonMaxSteps      = "max_steps"
)

// Result is how a run ended.
type Result struct {
	Status       string // StatusDone or StatusWaiting
	Reason       string
	Response     string // the model's last text
	Steps        int    // inferences made
	Conversation []Message
}

// Run runs the loop from conv until it ends, and returns the result with the
// whole conversation. Cancelling ctx ends the run with reason "cancelled";
// that is not an error. Through the hooks, the run's tasks are cancelled
// too only when the cause (context.Cause) matches bgtask.ErrRunStopped: the
// user stopped the run (the host cancels with
// context.CancelCauseFunc(bgtask.ErrRunStopped)), or a tool called
// CancelRun. Any other end of ctx, such as a server's request whose client
// hung up, leaves the tasks running; their ends reach the owner's next run. Errors
// come from the model, the hooks, or a missing Model or RunID.
func Run(ctx context.Context, cfg Config, conv []Message) (Result, error) {
	if cfg.Model == nil {
		return Result{}, errors.New("agentloop: no model")
	}
	if cfg.Hooks != nil && cfg.RunID == "" {
		return Result{}, errors.New("agentloop: a run with hooks needs a RunID")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx = context.WithValue(ctx, runCancelKey{}, cancel)
	r := &run{cfg: cfg, conv: conv, tools: make(map[string]Tool, len(cfg.Tools))}
	for _, t := range cfg.Tools {
		r.tools[t.Name] = t
		r.specs = append(r.specs, ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema})
	}
	if r.cfg.MaxSteps <= 0 {
		r.cfg.MaxSteps = DefaultMaxSteps
	}
	if h := cfg.Hooks; h != nil {
		if err := h.RunStart(ctx, bgtask.RunInfo{RunID: cfg.RunID, AgentID: cfg.AgentID}); err != nil {
			return Result{}, err
		}
	}
	res, err := r.loop(ctx)
	res.Steps, res.Conversation = r.steps, r.conv
	if h := cfg.Hooks; h != nil {
		// A fresh context: the run's own may be cancelled, and the end must
		// still be recorded. Only a stop (ErrRunStopped, or a tool's
		// CancelRun) cancels the run's tasks; a context that ended for
		// another reason (the request's client went away) leaves them
		// running, and their ends reach the next run.
		// A run that failed or was cancelled may not have had the model
		// answer its last step: its events are marked heard only once a
		// later step proves it (bgtask.RunOutcome.Aborted).
		out := bgtask.RunOutcome{
			RunID:    cfg.RunID,
			Canceled: res.Reason == ReasonCanceled && bgtask.RunStopped(ctx),
			Aborted:  err != nil || res.Reason == ReasonCanceled,
		}
		endErr := h.RunEnd(context.WithoutCancel(ctx), out)
		err = errors.Join(err, endErr)
	}
	return res, err
}

type runCancelKey struct{}

// ErrRunCanceled is the cause of a run cancelled by CancelRun. It matches
// bgtask.ErrRunStopped: the run was stopped, so its tasks are cancelled.
var ErrRunCanceled = fmt.Errorf("agentloop: run cancelled by a tool: %w", bgtask.ErrRunStopped)

// CancelRun cancels the run whose tool call ctx belongs to: the run ends
// "cancelled" once the call returns. It does nothing for a ctx that is not
// a tool call of Run. Wire it to the task tools' cancel_task "self":
// agent.Tools(owner, agent.WithOnSelfCancel(agentloop.CancelRun)).
func CancelRun(ctx context.Context) {
	if cancel, ok := ctx.Value(runCancelKey{}).(context.CancelCauseFunc); ok {
		cancel(ErrRunCanceled)
	}
}

// run is the state of one Run.
type run struct {
	cfg   Config
	conv  []Message
	tools map[string]Tool
	specs []ToolSpec
	steps int
	last  string
	held  []agent.PromptMessage // delivered at a boundary, reported with the next step
}

func (r *run) loop(ctx context.Context) (Result, error) {
	for {
		if ctx.Err() != nil {
			return r.end(StatusDone, ReasonCanceled), nil
		}
		if r.steps == r.cfg.MaxSteps {
			return r.end(StatusDone, ReasonMaxSteps), nil
		}
		resp, delivered, err := r.infer(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return r.end(StatusDone, ReasonCanceled), nil
			}
			return r.end(StatusDone, ""), err
		}
		suspended, err := r.runCalls(ctx, resp.Calls)
		if err != nil {
			return r.end(StatusDone, ""), err
		}
		if r.cfg.OnStep != nil {
			r.cfg.OnStep(Step{Index: r.steps, Delivered: delivered, Response: resp})
		}
		if ctx.Err() != nil {
			return r.end(StatusDone, ReasonCanceled), nil
		}
		pending, err := r.stepEnd(ctx)
		if err != nil {
			return r.end(StatusDone, ""), err
		}
		switch {
		case suspended != nil:
			if r.cfg.Decisions == nil {
				return r.end(StatusWaiting, ReasonSuspended), nil
			}
			if err := r.suspend(ctx, suspended); err != nil {
				if ctx.Err() != nil {
					return r.end(StatusDone, ReasonCanceled), nil
				}
				return r.end(StatusDone, ""), err
			}
			continue
		case len(resp.Calls) > 0:
			continue
		}
		if res, end, err := r.naturalEnd(ctx, pending); end {
			return res, err
		}
	}
}

// naturalEnd handles an answer without tool calls. What came meanwhile is
// delivered and gives the model another turn (end false). Otherwise the run
// ends done, or waiting for its tasks, or, for a sub-agent, waits for
// something to deliver; a wake-up with nothing new does not call the model.
func (r *run) naturalEnd(ctx context.Context, pending bool) (res Result, end bool, err error) {
	for {
		got, err := r.deliver(ctx)
		switch {
		case err != nil:
			return r.end(StatusDone, ""), true, err
		case got:
			return Result{}, false, nil
		case !pending:
			return r.end(StatusDone, ReasonNatural), true, nil
		case !r.cfg.SubAgent:
			return r.end(StatusWaiting, ReasonAwaitingTasks), true, nil
		}
		if err := r.cfg.Hooks.WaitEvent(ctx); err != nil {
			if ctx.Err() != nil {
				return r.end(StatusDone, ReasonCanceled), true, nil
			}
			return r.end(StatusDone, ""), true, err
		}
		if pending, err = r.stepEnd(ctx); err != nil {
			return r.end(StatusDone, ""), true, err
		}
	}
}

func (r *run) end(status, reason string) Result {
	return Result{Status: status, Reason: reason, Response: r.last}
}

// infer delivers background events, shows the model the conversation and
// the prompt view, and records its answer.
func (r *run) infer(ctx context.Context) (Response, []agent.PromptMessage, error) {
	delivered := r.held
	r.held = nil
	msgs := r.conv
	if h := r.cfg.Hooks; h != nil {
		got, err := h.BeforeInference(ctx)
		if err != nil {
			return Response{}, nil, err
		}
		var context []Message
		for _, pm := range got {
			if pm.Ephemeral {
				context = append(context, fromPrompt(pm))
				continue
			}
			delivered = append(delivered, pm)
			r.conv = append(r.conv, fromPrompt(pm))
		}
		msgs = append(append([]Message(nil), r.conv...), context...)
	}
	r.steps++
	resp, err := r.cfg.Model.Next(ctx, Request{Messages: msgs, Tools: r.specs})
	if err != nil {
		return Response{}, delivered, fmt.Errorf("agentloop: model: %w", err)
	}
	r.last = resp.Text
	r.conv = append(r.conv, Message{Role: "assistant", Content: resp.Text, Calls: resp.Calls})
	return resp, delivered, nil
}

// runCalls runs the step's tool calls in order, each with the call's
// lineage on its context. It returns the first call that suspended; the
// calls after it still run.
func (r *run) runCalls(ctx context.Context, calls []ToolCall) (suspended *ToolCall, err error) {
	for i := range calls {
		call := &calls[i]
		lineage := bgtask.ToolCall{RunID: r.cfg.RunID, CallID: call.ID, AgentID: r.cfg.AgentID}
		out, suspend := r.call(bgtask.WithToolCall(ctx, lineage), call)
		if suspend {
			if suspended == nil {
				suspended = call
			}
		} else {
			r.conv = append(r.conv, Message{Role: "tool", ToolCallID: call.ID, Content: out})
		}
		if h := r.cfg.Hooks; h != nil {
			if err := h.AfterToolCall(ctx, lineage); err != nil {
				return nil, err
			}
		}
	}
	return suspended, nil
}

// call runs one tool. A tool error is the model's to read, not the loop's.
func (r *run) call(ctx context.Context, call *ToolCall) (out string, suspend bool) {
	t, ok := r.tools[call.Name]
	if !ok {
		return fmt.Sprintf("error: unknown tool %q", call.Name), false
	}
	res, err := t.Call(ctx, call.Args)
	switch {
	case errors.Is(err, ErrSuspend):
		return "", true
	case err != nil:
		return "error: " + err.Error(), false
	}
	return string(res), false
}

func (r *run) stepEnd(ctx context.Context) (bool, error) {
	if r.cfg.Hooks == nil {
		return false, nil
	}
	return r.cfg.Hooks.StepEnd(ctx)
}

// deliver appends what the hooks have waiting and reports whether any of it
// wakes the model: quiet progress (bgtype.Event.Quiet) alone does not.
func (r *run) deliver(ctx context.Context) (bool, error) {
	if r.cfg.Hooks == nil {
		return false, nil
	}
	got, err := r.cfg.Hooks.Deliver(ctx)
	woke := false
	for _, pm := range got {
		r.conv = append(r.conv, fromPrompt(pm))
		r.held = append(r.held, pm)
		woke = woke || pm.Event == nil || !pm.Event.Quiet // progress alone is no reason to call the model
	}
	return woke, err
}

// suspend waits for the decision on call. Meanwhile background events are
// delivered into the conversation, but the model is not called: it sees
// them with the decision.
func (r *run) suspend(ctx context.Context, call *ToolCall) error {
	for {
		waitCtx, stop := context.WithCancel(ctx)
		events := make(chan error, 1)
		if r.cfg.Hooks != nil {
			go func() { events <- r.cfg.Hooks.WaitEvent(waitCtx) }()
		}
		select {
		case d, ok := <-r.cfg.Decisions:
			stop()
			r.drain(events)
			if !ok {
				return errors.New("agentloop: decisions channel closed while suspended")
			}
			if d.CallID != call.ID {
				return fmt.Errorf("agentloop: decision for call %q, suspended on %q", d.CallID, call.ID)
			}
			r.conv = append(r.conv, Message{Role: "tool", ToolCallID: call.ID, Content: d.Result})
			return nil
		case <-ctx.Done():
			stop()
			r.drain(events)
			return context.Cause(ctx)
		case err := <-events:
			stop()
			if err != nil {
				return err
			}
			if _, err := r.deliver(ctx); err != nil {
				return err
			}
		}
	}
}

// drain waits for the event waiter to return, so it never outlives the
// suspension.
func (r *run) drain(events chan error) {
	if r.cfg.Hooks != nil {
		<-events
	}
}

func fromPrompt(pm agent.PromptMessage) Message {
	return Message{Role: pm.Role, Content: pm.Content, From: pm.From, Internal: pm.Internal}
}

// Text returns a tool result for plain text.
func Text(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
