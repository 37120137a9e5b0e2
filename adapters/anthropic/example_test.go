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
	"github.com/bgtask/bgtask/agent"
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
	owner := m.Owner("thread-1")
	id, err := owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }, bgtask.WithName("fetch"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}

	ts, err := bganthropic.New(agent.Tools(owner))
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

// A step's user turn: the tool_result blocks and the events the Plugin
// delivered join in one user message, results first; the Plugin's
// instructions go to the system prompt, and the task list to this request
// only.
func ExampleAppendUserTurn() {
	// The model's reply, its results, and what plugin.BeforeInference gave.
	reply := anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "list_tasks"))
	results := []anthropic.ContentBlockParamUnion{anthropic.NewToolResultBlock("toolu_1", `{"tasks":[]}`, false)}
	delivered := []agent.PromptMessage{
		{Role: "user", Content: `<background-task-event …>…</background-task-event>`, Internal: true},
		{Role: "system", Content: "Background tasks: …", Internal: true, Ephemeral: true},
		{Role: "user", Content: `<background-tasks …>…</background-tasks>`, Internal: true, Ephemeral: true},
	}
	var keep, once []agent.PromptMessage
	for _, m := range delivered {
		if m.Ephemeral {
			once = append(once, m)
		} else {
			keep = append(keep, m)
		}
	}

	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What runs?")), reply}
	_, events := bganthropic.MessagePrompt(keep)
	history = bganthropic.AppendUserTurn(history, results...)
	history = bganthropic.AppendUserTurn(history, events...)

	system, view := bganthropic.MessagePrompt(once)
	params := anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 1024,
		System:    append([]anthropic.TextBlockParam{{Text: "You are a helpful agent."}}, system...),
		Messages:  bganthropic.AppendUserTurn(history, view...), // history keeps no task list
	}
	for _, s := range params.System {
		fmt.Println("system:", s.Text)
	}
	for _, m := range params.Messages {
		var blocks []string
		for _, b := range m.Content {
			blocks = append(blocks, *b.GetType())
		}
		fmt.Println(m.Role+":", strings.Join(blocks, " "))
	}
	fmt.Println("kept:", len(history[len(history)-1].Content), "blocks")
	// Output:
	// system: You are a helpful agent.
	// system: Background tasks: …
	// user: text
	// assistant: tool_use
	// user: tool_result text text
	// kept: 2 blocks
}
