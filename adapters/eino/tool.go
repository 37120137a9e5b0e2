package bgeino

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// invokable is one bgtask tool as an Eino InvokableTool.
type invokable struct {
	t      agent.Tool
	params *jsonschema.Schema // t.Schema, decoded once
}

// New returns t as an Eino InvokableTool whose Info has t's name,
// description and schema. It fails if t's Schema is not a JSON Schema
// object. The tool is safe for concurrent use, as ToolsNode runs the calls
// of one message in parallel. A panic in t's Call is not recovered here
// (bgtask's own tools do not panic).
func New(t agent.Tool) (tool.InvokableTool, error) {
	var params jsonschema.Schema
	if err := json.Unmarshal(t.Schema, &params); err != nil {
		return nil, fmt.Errorf("bgeino: tool %q: schema: %w", t.Name, err)
	}
	return &invokable{t: t, params: &params}, nil
}

// Tools returns each of tools (usually an Owner's Tools) made with New, in
// order, ready for compose.ToolsNodeConfig.Tools.
func Tools(tools []agent.Tool) ([]tool.BaseTool, error) {
	out := make([]tool.BaseTool, len(tools))
	for i, t := range tools {
		it, err := New(t)
		if err != nil {
			return nil, err
		}
		out[i] = it
	}
	return out, nil
}

// Info returns the tool's name, description and parameters' JSON Schema.
func (it *invokable) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{
		Name:        it.t.Name,
		Desc:        it.t.Description,
		ParamsOneOf: schema.NewParamsOneOfByJSONSchema(it.params),
	}, nil
}

// InvokableRun calls the tool with the model's arguments, with ctx (which
// carries the caller's scope: the run of bgtask.WithToolCall, or the
// current task; when it ends, a wait_task call returns). When ctx carries
// the id of the tool call Eino is running (a ToolsNode sets it), the call
// runs with a bgtask.ToolCall of that id (with the run and agent of the
// one on ctx), so a task it spawns records the call in its Parent. It
// returns the result, or the error's text when the error is the model's
// mistake (see IsModelMistake); any other error, ctx's included, is
// returned (see the package doc). Eino's call options are ignored.
func (it *invokable) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	if id := compose.GetToolCallID(ctx); id != "" {
		call, _ := bgtask.ToolCallFromContext(ctx)
		call.CallID = id
		ctx = bgtask.WithToolCall(ctx, call)
	}
	res, err := it.t.Call(ctx, json.RawMessage(args))
	switch {
	case err == nil:
		return string(res), nil
	case IsModelMistake(err):
		return err.Error(), nil
	}
	return "", fmt.Errorf("bgeino: %s: %w", it.t.Name, err)
}
