package bglangchain

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tmc/langchaingo/tools"

	"github.com/bgtask/bgtask/agent"
)

// tool is one bgtask tool as a LangChainGo tool.
type tool struct {
	t    agent.Tool
	desc string
}

var _ tools.Tool = tool{}

// New returns t as a LangChainGo tool: its name, its description followed
// by the JSON Schema of its input, and a Call that passes the input to t as
// its JSON arguments. The tool is safe for concurrent use. A panic in t's
// Call is not recovered here (bgtask's own tools do not panic).
func New(t agent.Tool) tools.Tool {
	return tool{t: t, desc: t.Description + "\n\nInput: one JSON object with this JSON Schema: " + string(t.Schema)}
}

// Tools returns each of tools (usually an Owner's Tools) made with New, in
// order, ready for agents.NewOneShotAgent or agents.NewOpenAIFunctionsAgent.
func Tools(ts []agent.Tool) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		out[i] = New(t)
	}
	return out
}

// Name returns the tool's name.
func (lt tool) Name() string { return lt.t.Name }

// Description returns the tool's description and its input's JSON Schema.
func (lt tool) Description() string { return lt.desc }

// Call runs the tool with input as its JSON arguments, with ctx (which
// carries the caller's scope: the run of bgtask.WithToolCall, or the
// current task; when it ends, a wait_task call returns). It returns the
// result, or the error's text when the error is the model's mistake (see
// IsModelMistake); any other error, ctx's included, is returned (see the
// package doc).
func (lt tool) Call(ctx context.Context, input string) (string, error) {
	res, err := lt.t.Call(ctx, json.RawMessage(input))
	switch {
	case err == nil:
		return string(res), nil
	case IsModelMistake(err):
		return err.Error(), nil
	}
	return "", fmt.Errorf("bglangchain: %s: %w", lt.t.Name, err)
}
