package bglangchain_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"

	"github.com/bgtask/bgtask"
	bglangchain "github.com/bgtask/bgtask/adapters/langchaingo"
	"github.com/bgtask/bgtask/agent"
)

// The README's "Framework adapters": the tools in a LangChainGo one-shot
// agent, whose model lists the owner's tasks, then answers.
func Example_readmeExecutor() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	llm := &scriptedModel{replies: []string{
		action("list_tasks", "{}"),
		"Thought: I now know the final answer\nFinal Answer: Nothing runs.",
	}}

	executor := agents.NewExecutor(agents.NewOneShotAgent(llm, bglangchain.Tools(agent.Tools(owner))))
	answer, err := chains.Run(ctx, executor, "What is still running?")

	fmt.Println(answer, err, len(llm.prompts), "model calls")
	// Output: Nothing runs. <nil> 2 model calls
}
