package bgeino_test

import (
	"context"
	"fmt"
	"log"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/bgtask/bgtask"
	bgeino "github.com/bgtask/bgtask/adapters/eino"
	"github.com/bgtask/bgtask/agent"
)

// The README's "Framework adapters": the tools in an Eino ReAct agent,
// whose model lists the owner's tasks, then answers.
func Example_readmeReact() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	chatModel := &scriptedModel{replies: []*schema.Message{
		schema.AssistantMessage("", []schema.ToolCall{toolCall("call_1", "list_tasks", "{}")}),
		schema.AssistantMessage("Nothing runs.", nil),
	}}

	tools, err := bgeino.Tools(agent.Tools(owner))
	reactAgent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: chatModel,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools, UnknownToolsHandler: bgeino.UnknownTools(tools)}, // a made-up tool name is answered, not the run's end
	})

	if err != nil {
		log.Fatal(err)
	}
	out, err := reactAgent.Generate(ctx, []*schema.Message{schema.UserMessage("What runs?")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Content, len(chatModel.tools), "tools")
	// Output: Nothing runs. 5 tools
}
