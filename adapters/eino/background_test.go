package bgeino_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	bgeino "github.com/bgtask/bgtask/adapters/eino"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// readingModel is an Eino ToolCallingChatModel whose replies read the
// tool messages of its input, as a model reads its calls' results.
type readingModel struct {
	mu    sync.Mutex
	n     int
	reply func(i int, results []string) *schema.Message
	tools []*schema.ToolInfo
}

func (rm *readingModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	var results []string
	for _, m := range input {
		switch m.Role {
		case schema.Assistant:
			results = nil
		case schema.Tool:
			results = append(results, m.Content)
		}
	}
	rm.n++
	return rm.reply(rm.n-1, results), nil
}

func (rm *readingModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return nil, errors.New("reading model: no streaming")
}

func (rm *readingModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.tools = tools
	return rm, nil
}

// The model chooses the background per call through an Eino ReAct agent
// (issue 33): build in the foreground, in the background, and a
// foreground call that prints, is promoted, and whose output the model
// reads in three increments, every byte once. The host only wraps its
// tools, as for any bgtask tool.
func TestReactAgentBackgroundPerCall(t *testing.T) {
	s := adaptertest.NewBackgroundScenario(t)
	var results [][]string
	rm := &readingModel{reply: func(i int, prev []string) *schema.Message {
		if i > 0 {
			results = append(results, prev)
		}
		calls := s.Calls(t, i, prev)
		if calls == nil {
			return schema.AssistantMessage(adaptertest.FinalAnswer, nil)
		}
		tcs := make([]schema.ToolCall, len(calls))
		for j, c := range calls {
			tcs[j] = toolCall(c.ID, c.Name, c.Args)
		}
		return schema.AssistantMessage("", tcs)
	}}
	tools, err := bgeino.Tools(s.Tools)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := react.NewAgent(t.Context(), &react.AgentConfig{
		ToolCallingModel: rm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
		MaxStep:          4 * adaptertest.Turns,
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ra.Generate(s.CallCtx, []*schema.Message{schema.UserMessage("Build lib, app and all.")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != adaptertest.FinalAnswer {
		t.Errorf("final answer %q", out.Content)
	}
	s.Check(t, results)
	build := rm.tools[len(rm.tools)-1]
	params, err := build.ParamsOneOf.ToJSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := params.Properties.Get(agent.BackgroundParam); build.Name != "build" || !ok {
		t.Errorf("build's definition: %+v", build)
	}
}
