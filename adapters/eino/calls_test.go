package bgeino_test

import (
	"encoding/json"
	"errors"
	"fmt"
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
