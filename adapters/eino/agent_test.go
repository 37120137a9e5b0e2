package bgeino_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/bgtask/bgtask"
	bgeino "github.com/bgtask/bgtask/adapters/eino"
)

// scriptedModel is an Eino ToolCallingChatModel that answers each Generate
// with the next of replies and keeps the inputs and the tools bound.
type scriptedModel struct {
	mu      sync.Mutex
	replies []*schema.Message
	inputs  [][]*schema.Message
	tools   []*schema.ToolInfo
}

func (sm *scriptedModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if len(sm.inputs) == len(sm.replies) {
		return nil, errors.New("scripted model: no more replies")
	}
	sm.inputs = append(sm.inputs, slices.Clone(input))
	return sm.replies[len(sm.inputs)-1], nil
}

func (sm *scriptedModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return nil, errors.New("scripted model: no streaming")
}

func (sm *scriptedModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.tools = tools
	return sm, nil
}

func toolCall(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

// newAgent returns a ReAct agent (a chat model node and a ToolsNode) with
// the owner's tools and the scripted model.
func newAgent(t *testing.T, owner bgtask.Owner, sm *scriptedModel) *react.Agent {
	t.Helper()
	tools, err := bgeino.Tools(agent.Tools(owner))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := react.NewAgent(t.Context(), &react.AgentConfig{
		ToolCallingModel: sm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
	})
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// An Eino ReAct agent runs the tools through its ToolsNode on real tasks:
// the model is bound to each tool's schema as given, and its next input
// has one tool message per call with the exact results; a bad argument's
// error text is a result, and the run goes on.
func TestReactAgent(t *testing.T) {
	f := adaptertest.NewFixture(t)
	calls := []schema.ToolCall{
		toolCall("call_1", "list_tasks", `{"status":["completed"]}`),
		toolCall("call_2", "get_task", `{"task_id":"`+f.Fetch+`"}`),
		toolCall("call_3", "cancel_task", `{"target":{"relation":"child","name":"crawler"}}`),
		toolCall("call_4", "list_tasks", `{"state":"completed"}`),
	}
	sm := &scriptedModel{replies: []*schema.Message{
		schema.AssistantMessage("", calls),
		schema.AssistantMessage("The crawler is cancelled.", nil),
	}}
	ra := newAgent(t, f.Owner, sm)

	out, err := ra.Generate(f.CallCtx, []*schema.Message{schema.UserMessage("Stop the crawler.")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != "The crawler is cancelled." {
		t.Errorf("final answer %q", out.Content)
	}
	f.CheckCrawlerCanceled(t)

	tools := agent.Tools(f.Owner)
	if len(sm.tools) != len(tools) {
		t.Fatalf("%d tools bound, want %d", len(sm.tools), len(tools))
	}
	for i, tool := range tools {
		info := sm.tools[i]
		params, err := info.ParamsOneOf.ToJSONSchema()
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		b, _ := json.Marshal(params)
		if err := errors.Join(json.Unmarshal(b, &got), json.Unmarshal(tool.Schema, &want)); err != nil {
			t.Fatal(err)
		}
		if info.Name != tool.Name || info.Desc != tool.Description || !adaptertest.JSONEqual(got, want) {
			t.Errorf("tool %d: %s, description equal %v, schema %s; want %s with its description and schema %s",
				i, info.Name, info.Desc == tool.Description, b, tool.Name, tool.Schema)
		}
	}

	if len(sm.inputs) != 2 || len(sm.inputs[1]) != 2+len(calls) {
		t.Fatalf("model inputs %v", sm.inputs)
	}
	want := []string{
		f.Direct(t, "list_tasks", `{"status":["completed"]}`),
		f.Direct(t, "get_task", `{"task_id":"`+f.Fetch+`"}`),
		`{"status":"accepted","root_task_id":"` + f.Crawler + `","cancelled_count":1}`,
		`invalid arguments: unknown field "state"`,
	}
	for i, w := range want {
		got := sm.inputs[1][2+i]
		if got.Role != schema.Tool || got.ToolCallID != calls[i].ID || got.Content != w {
			t.Errorf("tool message %d: %s %s %q\nwant tool %s %q", i, got.Role, got.ToolCallID, got.Content, calls[i].ID, w)
		}
	}
}

// A closed Manager is not the model's mistake: the tool's error ends the
// agent's run, and the caller can match it.
func TestReactAgentClosed(t *testing.T) {
	f := adaptertest.NewFixture(t)
	sm := &scriptedModel{replies: []*schema.Message{
		schema.AssistantMessage("", []schema.ToolCall{toolCall("call_1", "cancel_task", `{"target":{"relation":"self"}}`)}),
		schema.AssistantMessage("unreachable", nil),
	}}
	agent := newAgent(t, f.Owner, sm)
	if err := f.M.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := agent.Generate(f.CallCtx, []*schema.Message{schema.UserMessage("Stop everything.")})
	if !errors.Is(err, bgtask.ErrClosed) || out != nil || len(sm.inputs) != 1 {
		t.Fatalf("after shutdown: %v, %v, %d model calls; want ErrClosed, no message, 1 call", out, err, len(sm.inputs))
	}
}
