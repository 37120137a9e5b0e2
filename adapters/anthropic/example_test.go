package bganthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/bgtask/bgtask"
	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
)

// The Toolset gives the tool definitions for a request and answers the
// tool_use blocks of the model's reply; a bad argument is answered with its
// error text and is_error, for the model to correct.
func Example() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	agent := m.Owner("thread-1")
	id, err := agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }, bgtask.WithName("fetch"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := agent.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}

	ts, err := bganthropic.New(agent.Tools())
	if err != nil {
		log.Fatal(err)
	}
	params := anthropic.MessageNewParams{Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 1024, Tools: ts.MessageTools()}
	var names []string
	for _, tool := range params.Tools {
		names = append(names, *tool.GetName())
	}
	fmt.Println(strings.Join(names, " "))

	// The model's reply (client.Messages.New).
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"role":"assistant","stop_reason":"tool_use","content":[
		{"type":"tool_use","id":"toolu_1","name":"get_task","input":{"task_id":"`+id+`"}},
		{"type":"tool_use","id":"toolu_2","name":"list_tasks","input":{"state":"done"}}]}`), &msg); err != nil {
		log.Fatal(err)
	}
	results, err := ts.AnswerMessage(ctx, &msg)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		var got struct {
			Task struct{ Name, Status string }
		}
		text := r.OfToolResult.Content[0].OfText.Text
		if json.Unmarshal([]byte(text), &got) == nil {
			text = got.Task.Name + " " + got.Task.Status
		}
		fmt.Println(r.OfToolResult.ToolUseID, r.OfToolResult.IsError.Value, text)
	}
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	// Output:
	// list_tasks get_task cancel_task send_message wait_task
	// toolu_1 false fetch completed
	// toolu_2 true invalid arguments: unknown field "state"
}
