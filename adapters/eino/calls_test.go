package bgeino_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/bgtask/bgtask"
	bgeino "github.com/bgtask/bgtask/adapters/eino"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// startJob is adaptertest.StartJob, whose name "nowhere" is an error it
// marks as the model's.
func startJob(owner bgtask.Owner) agent.Tool {
	return adaptertest.StartJob(owner, func(name string) error {
		if name == "nowhere" {
			return fmt.Errorf("start_job: %w", bgeino.ModelError(errors.New("no such place: nowhere")))
		}
		return nil
	})
}

// A ReAct agent's calls of a host tool that spawns: each task records the
// Eino tool call's id and the run of the graph's ctx, and the model's
// mistakes (a reserved name, an error the tool marks with ModelError) are
// tool messages the model reads, not the end of the run.
func TestReactAgentHostTool(t *testing.T) {
	f := adaptertest.NewFixture(t)
	calls := []schema.ToolCall{
		toolCall("call_1", "start_job", `{"name":"one"}`),
		toolCall("call_2", "start_job", `{"name":"two"}`),
		toolCall("call_3", "start_job", `{"name":"self"}`),
		toolCall("call_4", "start_job", `{"name":"nowhere"}`),
	}
	sm := &scriptedModel{replies: []*schema.Message{
		schema.AssistantMessage("", calls),
		schema.AssistantMessage("Two jobs run.", nil),
	}}
	tools, err := bgeino.Tools([]agent.Tool{startJob(f.Owner)})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := react.NewAgent(t.Context(), &react.AgentConfig{ToolCallingModel: sm, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.Generate(bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-7", AgentID: "lead"}), []*schema.Message{schema.UserMessage("Start jobs.")})
	if err != nil || out.Content != "Two jobs run." {
		t.Fatalf("Generate: %v, %v", out, err)
	}
	if len(sm.inputs) != 2 || len(sm.inputs[1]) != 2+len(calls) {
		t.Fatalf("model inputs %v", sm.inputs)
	}
	for i, want := range []string{"", "", `bgtask: invalid argument: task name "self" is reserved`, "start_job: no such place: nowhere"} {
		got := sm.inputs[1][2+i]
		if got.Role != schema.Tool || got.ToolCallID != calls[i].ID {
			t.Fatalf("tool message %d: %s %s", i, got.Role, got.ToolCallID)
		}
		if want != "" {
			if got.Content != want {
				t.Errorf("tool message %d: %q, want %q", i, got.Content, want)
			}
			continue
		}
		var id string
		if err := json.Unmarshal([]byte(got.Content), &id); err != nil {
			t.Fatalf("tool message %d: %q, want a task id", i, got.Content)
		}
		meta, err := f.Owner.Get(t.Context(), id)
		if want := (bgtype.Parent{RunID: "run-7", CallID: calls[i].ID, AgentID: "lead"}); err != nil || meta.Parent != want {
			t.Errorf("task of %s: Parent %+v (%v), want %+v", calls[i].ID, meta.Parent, err, want)
		}
	}
}

// A ReAct agent whose ToolsNode has UnknownTools' handler answers a call
// of a made-up tool with the tools' names, in its place among the reply's
// calls, and the run goes on; without it, the run ends with an error.
func TestReactAgentUnknownTool(t *testing.T) {
	f := adaptertest.NewFixture(t)
	calls := []schema.ToolCall{
		toolCall("call_1", "get_tasks", `{}`),
		toolCall("call_2", "get_task", `{"task_id":"task_unknown"}`),
	}
	tools, err := bgeino.Tools(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	sm := &scriptedModel{replies: []*schema.Message{
		schema.AssistantMessage("", calls),
		schema.AssistantMessage("No such task.", nil),
	}}
	ra, err := react.NewAgent(t.Context(), &react.AgentConfig{ToolCallingModel: sm,
		ToolsConfig: compose.ToolsNodeConfig{Tools: tools, UnknownToolsHandler: bgeino.UnknownTools(tools)}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ra.Generate(t.Context(), []*schema.Message{schema.UserMessage("Get it.")})
	if err != nil || out.Content != "No such task." {
		t.Fatalf("Generate: %v, %v", out, err)
	}
	if len(sm.inputs) != 2 || len(sm.inputs[1]) != 2+len(calls) {
		t.Fatalf("model inputs %v", sm.inputs)
	}
	for i, want := range []string{
		`unknown tool "get_tasks": the tools are list_tasks, get_task, cancel_task, send_message, wait_task`,
		"task not found: task_unknown",
	} {
		if got := sm.inputs[1][2+i]; got.Role != schema.Tool || got.ToolCallID != calls[i].ID || got.Content != want {
			t.Errorf("tool message %d: %s %s %q, want %s %q", i, got.Role, got.ToolCallID, got.Content, calls[i].ID, want)
		}
	}

	// The ToolsNode's default: the made-up name ends the run.
	sm = &scriptedModel{replies: []*schema.Message{schema.AssistantMessage("", calls)}}
	ra, err = react.NewAgent(t.Context(), &react.AgentConfig{ToolCallingModel: sm, ToolsConfig: compose.ToolsNodeConfig{Tools: tools}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.Generate(t.Context(), []*schema.Message{schema.UserMessage("Get it.")}); err == nil ||
		!strings.Contains(err.Error(), "tool get_tasks not found") {
		t.Fatalf("Generate without the handler: %v, want the ToolsNode's error", err)
	}
}
