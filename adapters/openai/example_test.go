package bgopenai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
)

// The Toolset gives the tool definitions for a request and answers the tool
// calls of the model's reply; a bad argument is answered with its error
// text, for the model to correct.
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

	ts, err := bgopenai.New(agent.Tools(owner))
	if err != nil {
		log.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{Model: openai.ChatModelGPT5, Tools: ts.ChatTools()}
	var names []string
	for _, tool := range params.Tools {
		names = append(names, tool.GetFunction().Name)
	}
	fmt.Println(strings.Join(names, " "))

	// The assistant message of a reply (resp.Choices[0].Message).
	var msg openai.ChatCompletionMessage
	if err := json.Unmarshal([]byte(`{"role":"assistant","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"get_task","arguments":"{\"task_id\":\"`+id+`\"}"}},
		{"id":"call_2","type":"function","function":{"name":"list_tasks","arguments":"{\"state\":\"done\"}"}}]}`), &msg); err != nil {
		log.Fatal(err)
	}
	answers, err := ts.AnswerChat(ctx, msg)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range answers {
		var got struct {
			Task struct{ Name, Status string }
		}
		content := a.OfTool.Content.OfString.Value
		if json.Unmarshal([]byte(content), &got) == nil {
			content = got.Task.Name + " " + got.Task.Status
		}
		fmt.Println(a.OfTool.ToolCallID, content)
	}
	params.Messages = append(append(params.Messages, msg.ToParam()), answers...)
	// Output:
	// list_tasks get_task cancel_task send_message wait_task
	// call_1 fetch completed
	// call_2 invalid arguments: unknown field "state"
}

// A step's messages: the tool messages right after the assistant message
// that called the tools, then the events the Plugin delivered; the
// Plugin's instructions are a system message, and they and the task list
// go in this request only.
func ExampleChatPrompt() {
	// The model's reply, its answers, and what plugin.BeforeInference gave.
	reply := openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ChatCompletionMessageToolCallUnion{
		{ID: "call_1", Type: "function", Function: openai.ChatCompletionMessageFunctionToolCallFunction{Name: "list_tasks", Arguments: "{}"}},
	}}
	answers := []openai.ChatCompletionMessageParamUnion{openai.ToolMessage(`{"tasks":[]}`, "call_1")}
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

	history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What runs?"), reply.ToParam()}
	history = append(append(history, answers...), bgopenai.ChatPrompt(keep)...)
	params := openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT5,
		Messages: append(history[:len(history):len(history)], bgopenai.ChatPrompt(once)...), // history keeps no task list
	}
	for _, m := range params.Messages {
		var sent struct{ Role string }
		b, _ := json.Marshal(m)
		json.Unmarshal(b, &sent)
		fmt.Println(sent.Role)
	}
	fmt.Println("kept:", len(history), "messages")
	// Output:
	// user
	// assistant
	// tool
	// user
	// system
	// user
	// kept: 4 messages
}
