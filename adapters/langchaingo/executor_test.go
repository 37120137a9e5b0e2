package bglangchain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/bgtask/bgtask"
	bglangchain "github.com/bgtask/bgtask/adapters/langchaingo"
)

// scriptedModel is a LangChainGo llms.Model that answers each call with the
// next of replies and keeps the prompts.
type scriptedModel struct {
	mu      sync.Mutex
	replies []string
	prompts []string
}

func (sm *scriptedModel) GenerateContent(_ context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if len(sm.prompts) == len(sm.replies) {
		return nil, errors.New("scripted model: no more replies")
	}
	var prompt strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			if text, ok := p.(llms.TextContent); ok {
				prompt.WriteString(text.Text)
			}
		}
	}
	sm.prompts = append(sm.prompts, prompt.String())
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: sm.replies[len(sm.prompts)-1]}}}, nil
}

func (sm *scriptedModel) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, sm, prompt, opts...)
}

// action is a ReAct reply that calls tool with input.
func action(tool, input string) string {
	return "Thought: I should use " + tool + ".\nAction: " + tool + "\nAction Input: " + input
}

func newExecutor(owner bgtask.Owner, sm *scriptedModel) *agents.Executor {
	agent := agents.NewOneShotAgent(sm, bglangchain.Tools(agent.Tools(owner)))
	return agents.NewExecutor(agent, agents.WithMaxIterations(6), agents.WithReturnIntermediateSteps())
}

// A LangChainGo agent executor runs the tools on real tasks: the prompt
// shows each tool with its schema, each observation is the exact result,
// and a bad argument's error text is an observation, the run going on.
func TestOneShotAgentExecutor(t *testing.T) {
	f := adaptertest.NewFixture(t)
	inputs := []struct{ tool, input string }{
		{"list_tasks", `{"status":["completed"]}`},
		{"get_task", `{"task_id":"` + f.Fetch + `"}`},
		{"cancel_task", `{"target":{"relation":"child","name":"crawler"}}`},
		{"list_tasks", `{"state":"completed"}`},
	}
	sm := &scriptedModel{}
	for _, in := range inputs {
		sm.replies = append(sm.replies, action(in.tool, in.input))
	}
	sm.replies = append(sm.replies, "Thought: I now know the final answer\nFinal Answer: The crawler is cancelled.")

	out, err := chains.Call(f.CallCtx, newExecutor(f.Owner, sm), map[string]any{"input": "Stop the crawler."})
	if err != nil {
		t.Fatal(err)
	}
	if out["output"] != "The crawler is cancelled." {
		t.Errorf("final answer %q", out["output"])
	}
	f.CheckCrawlerCanceled(t)

	for _, tool := range agent.Tools(f.Owner) {
		line := "- " + tool.Name + ": " + tool.Description + "\n\nInput: one JSON object with this JSON Schema: " + string(tool.Schema) + "\n"
		if !strings.Contains(sm.prompts[0], line) {
			t.Errorf("the prompt does not describe %s with its schema:\n%s", tool.Name, sm.prompts[0])
		}
	}

	want := []string{
		f.Direct(t, "list_tasks", `{"status":["completed"]}`),
		f.Direct(t, "get_task", `{"task_id":"`+f.Fetch+`"}`),
		`{"status":"accepted","root_task_id":"` + f.Crawler + `","cancelled_count":1}`,
		`invalid arguments: unknown field "state"`,
	}
	steps, _ := out["intermediateSteps"].([]schema.AgentStep)
	if len(steps) != len(want) || len(sm.prompts) != len(want)+1 {
		t.Fatalf("%d steps, %d model calls; want %d, %d", len(steps), len(sm.prompts), len(want), len(want)+1)
	}
	for i, w := range want {
		if steps[i].Action.Tool != inputs[i].tool || steps[i].Observation != w {
			t.Errorf("step %d: %s -> %q\nwant %s -> %q", i, steps[i].Action.Tool, steps[i].Observation, inputs[i].tool, w)
		}
		if obs := "\nObservation: " + w + "\n"; !strings.Contains(sm.prompts[len(want)], obs) {
			t.Errorf("the last prompt lacks observation %d %q", i, obs)
		}
	}
}

// A closed Manager is not the model's mistake: the tool's error ends the
// executor's run, and the caller can match it.
func TestOneShotAgentExecutorClosed(t *testing.T) {
	f := adaptertest.NewFixture(t)
	sm := &scriptedModel{replies: []string{action("cancel_task", `{"target":{"relation":"self"}}`), "Final Answer: unreachable"}}
	if err := f.M.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := chains.Call(f.CallCtx, newExecutor(f.Owner, sm), map[string]any{"input": "Stop everything."})
	if want := "bglangchain: cancel_task: bgtask: manager closed"; err == nil || err.Error() != want ||
		!errors.Is(err, bgtask.ErrClosed) || out != nil || len(sm.prompts) != 1 {
		t.Fatalf("after shutdown: %v, %v, %d model calls; want %s, no output, 1 call", out, err, len(sm.prompts), want)
	}
}

// A made-up tool name does not end the run: the executor itself answers
// it (an observation of its own text), and the run goes on, so this
// adapter needs no handler of its own.
func TestOneShotAgentExecutorUnknownTool(t *testing.T) {
	f := adaptertest.NewFixture(t)
	sm := &scriptedModel{replies: []string{
		action("get_tasks", `{}`),
		"Thought: I now know the final answer\nFinal Answer: Nothing.",
	}}
	out, err := chains.Call(f.CallCtx, newExecutor(f.Owner, sm), map[string]any{"input": "What runs?"})
	if err != nil || out["output"] != "Nothing." {
		t.Fatalf("run: %v, %v", out["output"], err)
	}
	steps, _ := out["intermediateSteps"].([]schema.AgentStep)
	if len(steps) != 1 || steps[0].Action.Tool != "get_tasks" || steps[0].Observation != "get_tasks is not a valid tool, try another one" {
		t.Fatalf("steps %+v, want the made-up call answered", steps)
	}
}
