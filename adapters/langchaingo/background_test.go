package bglangchain_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"

	bglangchain "github.com/bgtask/bgtask/adapters/langchaingo"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// readingModel is a LangChainGo llms.Model whose replies read the last
// observation of its prompt, as a model reads its last call's result.
type readingModel struct {
	mu      sync.Mutex
	n       int
	reply   func(i int, results []string) string
	prompts []string
}

func (rm *readingModel) GenerateContent(_ context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	var prompt strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			if text, ok := p.(llms.TextContent); ok {
				prompt.WriteString(text.Text)
			}
		}
	}
	rm.prompts = append(rm.prompts, prompt.String())
	var results []string
	if i := strings.LastIndex(prompt.String(), "\nObservation: "); i >= 0 {
		obs, _, _ := strings.Cut(prompt.String()[i+len("\nObservation: "):], "\n")
		results = []string{obs}
	}
	rm.n++
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: rm.reply(rm.n-1, results)}}}, nil
}

func (rm *readingModel) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, rm, prompt, opts...)
}

// The model chooses the background per call through a LangChainGo agent
// executor (issue 33): build in the foreground, in the background, and a
// foreground call that prints, is promoted, and whose output the model
// reads in three increments, every byte once. One call per step, as the
// one-shot agent makes them.
func TestExecutorBackgroundPerCall(t *testing.T) {
	s := adaptertest.NewBackgroundScenario(t)
	var results [][]string
	rm := &readingModel{reply: func(i int, prev []string) string {
		if i > 0 {
			results = append(results, prev)
		}
		calls := s.Calls(t, i, prev)
		if calls == nil {
			return "Thought: I now know the final answer\nFinal Answer: " + adaptertest.FinalAnswer
		}
		return action(calls[0].Name, calls[0].Args)
	}}
	ex := agents.NewExecutor(agents.NewOneShotAgent(rm, bglangchain.Tools(s.Tools)), agents.WithMaxIterations(adaptertest.Turns+1))
	out, err := chains.Call(s.CallCtx, ex, map[string]any{"input": "Build lib, app and all."})
	if err != nil {
		t.Fatal(err)
	}
	if out["output"] != adaptertest.FinalAnswer {
		t.Errorf("final answer %q", out["output"])
	}
	s.Check(t, results)
	if !strings.Contains(rm.prompts[0], `"`+agent.BackgroundParam+`":{"type":["boolean","null"]`) {
		t.Errorf("the prompt does not show build's schema with %s:\n%s", agent.BackgroundParam, rm.prompts[0])
	}
}
