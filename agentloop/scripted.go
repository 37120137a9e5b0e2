package agentloop

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// ScriptStep computes one answer of a ScriptedModel from the request it got.
type ScriptStep func(req Request) Response

// ScriptedModel answers with its steps in order, then with the text "done"
// for ever. It records every request. Safe for concurrent use; the zero
// value answers "done".
type ScriptedModel struct {
	mu       sync.Mutex // guards the fields below
	steps    []ScriptStep
	requests []Request
}

// NewScriptedModel returns a model that plays steps.
func NewScriptedModel(steps ...ScriptStep) *ScriptedModel {
	return &ScriptedModel{steps: steps}
}

// Next implements Model. It returns ctx's error if ctx has ended.
func (s *ScriptedModel) Next(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var step ScriptStep
	if len(s.steps) > 0 {
		step, s.steps = s.steps[0], s.steps[1:]
	}
	s.mu.Unlock()
	if step == nil {
		return Response{Text: "done"}, nil
	}
	return step(req), nil
}

// Requests returns the requests the model got so far.
func (s *ScriptedModel) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Say answers text.
func Say(text string) ScriptStep {
	return func(Request) Response { return Response{Text: text} }
}

// Call answers with tool calls, each a name and its arguments (any value
// encodable as JSON, or json.RawMessage). Call ids are "call-<n>-<i>": n
// is the number of messages the model was shown, i the call's index, so
// they are unique within a run.
func Call(calls ...CallSpec) ScriptStep {
	return func(req Request) Response {
		var resp Response
		for i, c := range calls {
			args, err := json.Marshal(c.Args)
			if err != nil {
				args = []byte(fmt.Sprintf("%q", err.Error()))
			}
			resp.Calls = append(resp.Calls, ToolCall{ID: fmt.Sprintf("call-%d-%d", len(req.Messages), i), Name: c.Name, Args: args})
		}
		return resp
	}
}

// CallSpec is one tool call of a Call step.
type CallSpec struct {
	Name string
	Args any
}
