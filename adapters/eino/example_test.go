package bgeino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/bgtask/bgtask"
	bgeino "github.com/bgtask/bgtask/adapters/eino"
	"github.com/bgtask/bgtask/agent"
)

// The tools run in Eino's ToolsNode; a bad argument is a tool message with
// the error's text, for the model to correct.
func Example() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	id, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }, bgtask.WithName("fetch"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}

	tools, err := bgeino.Tools(agent.Tools(owner))
	if err != nil {
		log.Fatal(err)
	}
	node, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: tools})
	if err != nil {
		log.Fatal(err)
	}
	// The model's reply, with two tool calls.
	reply := schema.AssistantMessage("", []schema.ToolCall{
		{ID: "call_1", Type: "function", Function: schema.FunctionCall{Name: "get_task", Arguments: `{"task_id":"` + id + `"}`}},
		{ID: "call_2", Type: "function", Function: schema.FunctionCall{Name: "list_tasks", Arguments: `{"state":"done"}`}},
	})
	msgs, err := node.Invoke(ctx, reply)
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range msgs {
		var got struct {
			Task struct{ Name, Status string }
		}
		content := msg.Content
		if json.Unmarshal([]byte(content), &got) == nil {
			content = got.Task.Name + " " + got.Task.Status
		}
		fmt.Println(msg.Role, msg.ToolCallID, content)
	}
	// Output:
	// tool call_1 fetch completed
	// tool call_2 invalid arguments: unknown field "state"
}
