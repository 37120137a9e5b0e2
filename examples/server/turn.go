package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
)

// turnResult is the answer to POST /threads/{id}/messages.
type turnResult struct {
	Thread string `json:"thread"`
	RunID  string `json:"run_id"`
	// Status: "answered" (Reply is the model's), "stopped" (the user
	// stopped the turn), "step_limit" (the model kept calling tools).
	Status string `json:"status"`
	Reply  string `json:"reply"`
	// Events are the events the model was handed this turn, in order, as
	// bgtask renders them (the model saw them escaped, in envelopes).
	Events []json.RawMessage `json:"events"`
	// Calls are the tools the model called, with their answers.
	Calls []callView `json:"tool_calls"`
	Steps int        `json:"steps"`
	// Pending: tasks of the thread will still report (their events come
	// with a later turn).
	Pending bool `json:"pending"`
}

type callView struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Answer    string `json:"answer"`
}

const systemPrompt = "You are the assistant of one conversation thread. Slow work runs in the background: " +
	"start it with a tool, keep talking, and report its results when they arrive."

// errTurnElsewhere answers a turn (409 Conflict) while a turn of the
// thread runs on another instance of the fleet (bgtask.ErrRunOpen): the
// thread's turns run one at a time across the instances, and the client
// retries once its other turn answered.
var errTurnElsewhere = errors.New("a turn of this thread is running on another instance: retry once it has answered")

// runTurn runs one agent turn of th for the user's text and returns the
// result, or an HTTP status and an error for the client.
//
// Contexts: the run's own work (the Plugin's phases, the tools, and so
// the tasks they spawn and the Foreground calls they make) runs on turnCtx,
// which keeps the request's values but not its cancellation: a client
// that hangs up does not stop background work, nor abandon a call in the
// foreground. Only the user's stop (bgtask.Owner.StopRun, on any instance:
// the turn's context ends with a *bgtask.RunStoppedError) cancels turnCtx. The model calls run on modelCtx, which also ends when the client
// leaves: a turn nobody waits for stops spending on the model at its next
// call, and its run ends without cancelling anything.
//
// The turn is open (startTurn): runTurn ends it.
func (s *server) runTurn(reqCtx context.Context, lt *agent.Thread[*thread], turn *agent.Turn, text string) (res turnResult, code int, err error) {
	th, plugin := lt.Value(), lt.Plugin()
	turnCtx, stop := context.WithCancelCause(context.WithoutCancel(reqCtx))
	defer stop(nil)
	unstop := context.AfterFunc(turn.Context(), func() { // a stop of the run, here or on another instance
		if cause := context.Cause(turn.Context()); errors.Is(cause, bgtask.ErrRunStopped) {
			stop(cause)
		}
	})
	defer unstop()
	modelCtx, cancelModel := context.WithCancelCause(turnCtx)
	defer cancelModel(nil)
	unwatch := context.AfterFunc(reqCtx, func() {
		s.log.Info("client gone", "thread", th.id)
		cancelModel(context.Cause(reqCtx))
	})
	defer unwatch()

	runID := turn.RunID()
	res = turnResult{Thread: th.id, RunID: runID, Events: []json.RawMessage{}, Calls: []callView{}}
	th.mu.Lock()
	th.turning, th.news = true, 0
	conv := make([]entry, len(th.history), len(th.history)+16)
	copy(conv, th.history)
	th.mu.Unlock()
	s.log.Info("turn", "thread", th.id, "run_id", runID)
	var endCause error // why the turn ended early, nil when it answered
	stopped := func() (turnResult, int, error) {
		endCause, res.Status = bgtask.ErrRunStopped, "stopped"
		return res, http.StatusOK, nil
	}
	defer func() {
		if bgtask.RunStopped(turnCtx) { // a stop that came as the turn ended stops it too
			endCause, res.Status = bgtask.ErrRunStopped, "stopped"
		}
		// In a fleet this instance's history of the thread is not the
		// fleet's: an aborted turn's events go back to the store, to be
		// handed to the thread's next turn wherever it lands, and the turn
		// is not kept here (bgtask.RunOutcome.Aborted is for a host whose
		// conversation outlives the turn on every instance).
		forget := endCause != nil && s.cfg.pg != ""
		if forget {
			_, _ = plugin.Receiver().Undeliver()
		}
		if err := endRun(context.WithoutCancel(turnCtx), turnCtx, turn, endCause == nil); err != nil {
			s.log.Error("run end", "thread", th.id, "run_id", runID, "err", err)
		}
		if !forget {
			s.keep(th, conv)
		}
		th.mu.Lock()
		th.turning = false
		th.mu.Unlock()
		s.log.Info("turn end", "thread", th.id, "run_id", runID, "status", res.Status, "cause", fmt.Sprint(endCause),
			"events", len(res.Events), "steps", res.Steps)
	}()

	conv = append(conv, entry{role: "user", plain: true, msg: openai.UserMessage(text)})
	for res.Steps < s.cfg.maxSteps {
		res.Steps++
		pms, err := plugin.BeforeInference(turnCtx)
		if err != nil && bgtask.RunStopped(turnCtx) {
			return stopped()
		}
		if err != nil {
			endCause = err
			s.log.Error("before inference", "thread", th.id, "err", err)
			return res, http.StatusInternalServerError, errors.New("cannot deliver the thread's events")
		}
		ephemeral := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(systemPrompt)}
		for _, pm := range pms {
			if pm.Event != nil {
				if b, err := json.Marshal(pm.Event); err == nil {
					res.Events = append(res.Events, b)
				}
			}
			// Only the Plugin's own instructions reach the system role.
			for _, msg := range bgopenai.ChatPrompt([]agent.PromptMessage{pm}) {
				if pm.Ephemeral {
					ephemeral = append(ephemeral, msg)
				} else {
					conv = append(conv, entry{role: pm.Role, msg: msg})
				}
			}
		}
		msgs := ephemeral[:1:1]
		for _, e := range conv {
			msgs = append(msgs, e.msg)
		}
		msgs = append(msgs, ephemeral[1:]...) // the task view last, for this call only
		resp, err := s.client.Chat.Completions.New(modelCtx, openai.ChatCompletionNewParams{
			Model: s.model, Messages: msgs, Tools: th.tools.ChatTools(),
		})
		switch {
		case err != nil && bgtask.RunStopped(modelCtx):
			return stopped()
		case err != nil && reqCtx.Err() != nil:
			endCause = context.Cause(reqCtx) // nobody to answer; the tasks go on
			return res, http.StatusServiceUnavailable, errors.New("client gone")
		case err != nil:
			endCause = err
			s.log.Error("model", "thread", th.id, "err", err)
			return res, http.StatusBadGateway, errors.New("the model call failed")
		case len(resp.Choices) == 0:
			endCause = errors.New("no choices")
			return res, http.StatusBadGateway, errors.New("the model answered no choice")
		}
		msg := resp.Choices[0].Message
		conv = append(conv, entry{role: "assistant", msg: msg.ToParam()})
		if len(msg.ToolCalls) == 0 {
			res.Status, res.Reply = "answered", msg.Content
			res.Pending, _ = plugin.StepEnd(turnCtx)
			return res, http.StatusOK, nil
		}
		// The adapter answers every call of its tools, even when it returns
		// an error (the host's, not the model's); calls of tools it does
		// not have are the host's to answer.
		answers, err := th.tools.AnswerChat(turnCtx, msg, bgopenai.WithRunID(runID))
		if answers == nil && err != nil { // nothing ran: no dangling tool calls in the history
			conv = conv[:len(conv)-1]
		} else {
			byID := make(map[string]openai.ChatCompletionMessageParamUnion, len(answers))
			for _, a := range answers {
				byID[a.OfTool.ToolCallID] = a
			}
			for _, c := range msg.ToolCalls { // every call gets an answer, in order
				a, ok := byID[c.ID]
				if !ok {
					a = openai.ToolMessage(fmt.Sprintf("no tool named %q", c.Function.Name), c.ID)
				}
				conv = append(conv, entry{role: "tool", msg: a})
				res.Calls = append(res.Calls, callView{Name: c.Function.Name, Arguments: c.Function.Arguments, Answer: a.OfTool.Content.OfString.Value})
			}
		}
		switch {
		case err != nil && bgtask.RunStopped(turnCtx):
			return stopped()
		case err != nil && errors.Is(err, bgtask.ErrCanceled) && plugin.Receiver().Owner().RunCanceled(runID):
			// The stop cancelled the call's task before the turn heard of
			// it (OnRunCanceled comes right after): a stop all the same.
			return stopped()
		case err != nil:
			endCause = err
			s.log.Error("tools", "thread", th.id, "err", err)
			return res, http.StatusInternalServerError, errors.New("a tool failed")
		}
		_ = plugin.AfterToolCall(turnCtx, bgtask.ToolCall{RunID: runID})
		if res.Pending, err = plugin.StepEnd(turnCtx); err != nil {
			endCause = err
			return res, http.StatusInternalServerError, errors.New("cannot end the step")
		}
	}
	res.Status = "step_limit"
	return res, http.StatusOK, nil
}

// keep stores conv as th's history, dropping the oldest turns whole while
// it is longer than cfg.maxHistory (a turn begins with the user's message,
// so no tool answer is kept without its call).
func (s *server) keep(th *thread, conv []entry) {
	start := len(conv) // one turn longer than the cap: nothing of it is kept
	for i, e := range conv {
		if (i == 0 || e.plain) && len(conv)-i <= s.cfg.maxHistory {
			start = i
			break
		}
	}
	th.mu.Lock()
	th.history = conv[start:]
	th.mu.Unlock()
}
