package bgopenai_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
)

// scriptedCall is one tool call a scripted model makes.
type scriptedCall struct{ id, name, args string }

// modelCalls returns the calls the scripted model makes in its first turn,
// on the fixture's tasks: a list, a read, a cancel, and a call with a bad
// argument.
func modelCalls(f adaptertest.Fixture) []scriptedCall {
	return []scriptedCall{
		{"call_1", "list_tasks", `{"status":["completed"]}`},
		{"call_2", "get_task", `{"task_id":"` + f.Fetch + `"}`},
		{"call_3", "cancel_task", `{"target":{"relation":"child","name":"crawler"}}`},
		{"call_4", "list_tasks", `{"state":"completed"}`},
	}
}

// wantAnswers returns what the model must get back for modelCalls, read
// after the loop (the list and the read do not change with the cancel).
func wantAnswers(t *testing.T, f adaptertest.Fixture) []string {
	return []string{
		f.Direct(t, "list_tasks", `{"status":["completed"]}`),
		f.Direct(t, "get_task", `{"task_id":"`+f.Fetch+`"}`),
		`{"status":"accepted","root_task_id":"` + f.Crawler + `","cancelled_count":1}`,
		`invalid arguments: unknown field "state"`,
	}
}

func chatReply(calls []scriptedCall, content string) string {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	msg := map[string]any{"role": "assistant", "content": content}
	finish := "stop"
	if len(calls) > 0 {
		tcs := make([]toolCall, len(calls))
		for i, c := range calls {
			tcs[i] = toolCall{c.id, "function", fn{c.name, c.args}}
		}
		msg["tool_calls"], msg["content"], finish = tcs, nil, "tool_calls"
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
	})
	return string(b)
}

// A host's Chat Completions loop with the Toolset: the SDK sends the tool
// definitions, the model's tool calls run on real tasks, and the next
// request carries one tool message per call with the exact results, a bad
// argument's error text included.
func TestChatCompletionsLoop(t *testing.T) {
	f := adaptertest.NewFixture(t)
	calls := modelCalls(f)
	model, client := newScriptedModel(t, "/chat/completions", chatReply(calls, ""), chatReply(nil, "The crawler is cancelled."))
	ts, err := bgopenai.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}

	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stop the crawler.")},
		Tools:    ts.ChatTools(),
	}
	var final string
	for turn := 0; ; turn++ {
		if turn == 3 {
			t.Fatal("the loop did not end")
		}
		resp, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			final = msg.Content
			break
		}
		answers, err := ts.AnswerChat(f.CallCtx, msg)
		if err != nil {
			t.Fatal(err)
		}
		params.Messages = append(append(params.Messages, msg.ToParam()), answers...)
	}
	if final != "The crawler is cancelled." {
		t.Errorf("final answer %q", final)
	}
	f.CheckCrawlerCanceled(t)

	checkDefinitions(t, f.Owner, true, model.Request(0)["tools"].([]any), func(def map[string]any) (string, string, any, any) {
		if def["type"] != "function" {
			t.Errorf("tool type %v", def["type"])
		}
		fn, _ := def["function"].(map[string]any)
		name, _ := fn["name"].(string)
		desc, _ := fn["description"].(string)
		return name, desc, fn["parameters"], fn["strict"]
	})
	msgs := model.Request(1)["messages"].([]any)
	if len(msgs) != 2+len(calls) {
		t.Fatalf("second request has %d messages, want %d", len(msgs), 2+len(calls))
	}
	for i, want := range wantAnswers(t, f) {
		got := msgs[2+i].(map[string]any)
		if got["role"] != "tool" || got["tool_call_id"] != calls[i].id || got["content"] != want {
			t.Errorf("answer %d: %v\nwant role tool, tool_call_id %s, content %s", i, got, calls[i].id, want)
		}
	}
}

// Every call of a reply is answered, in order: a call of a tool the
// Toolset does not have (a name the model made up) with an error naming
// the tools, for the model to correct, so that the conversation never
// holds a call without an answer. A closed Manager is the host's error,
// not the model's: the call is answered that it failed, and the error
// returned.
func TestAnswerChatUnknownToolAndClosed(t *testing.T) {
	f := adaptertest.NewFixture(t)
	ts, err := bgopenai.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	reply := chatReply([]scriptedCall{
		{"call_1", "web_search", `{"q":"go"}`},
		{"call_2", "get_task", `{"task_id":"task_unknown"}`},
	}, "")
	var resp openai.ChatCompletion
	if err := json.Unmarshal([]byte(reply), &resp); err != nil {
		t.Fatal(err)
	}
	answers, err := ts.AnswerChat(f.CallCtx, resp.Choices[0].Message)
	ids, texts := chatAnswers(answers)
	if err != nil || !slices.Equal(ids, []string{"call_1", "call_2"}) || !slices.Equal(texts, []string{
		`unknown tool "web_search": the tools are list_tasks, get_task, cancel_task, send_message, wait_task`,
		"task not found: task_unknown",
	}) {
		t.Fatalf("answers to %q: %q, %v; want both answered in order, the made-up tool's with the tools' names", ids, texts, err)
	}

	if err := f.M.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(chatReply([]scriptedCall{{"call_9", "cancel_task", `{"target":{"relation":"self"}}`}}, "")), &resp); err != nil {
		t.Fatal(err)
	}
	answers, err = ts.AnswerChat(f.CallCtx, resp.Choices[0].Message)
	if want := "bgopenai: cancel_task (call call_9): bgtask: manager closed"; err == nil || err.Error() != want || !errors.Is(err, bgtask.ErrClosed) {
		t.Errorf("after shutdown: %v; want %s", err, want)
	}
	if ids, texts := chatAnswers(answers); len(ids) != 1 || ids[0] != "call_9" || texts[0] != "tool call failed: the host could not run it" {
		t.Errorf("after shutdown: answers to %q: %q; want call_9 answered that the call failed", ids, texts)
	}
}
