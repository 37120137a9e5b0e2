package bganthropic_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/bgtask/bgtask"
	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
)

// toolUse is one tool_use block a scripted model sends.
type toolUse struct{ id, name, input string }

func messageReply(uses []toolUse, text string) string {
	var content []any
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, u := range uses {
		content = append(content, map[string]any{"type": "tool_use", "id": u.id, "name": u.name, "input": json.RawMessage(u.input)})
	}
	stop := "end_turn"
	if len(uses) > 0 {
		stop = "tool_use"
	}
	b, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
		"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
	return string(b)
}

// A host's Messages loop with the Toolset: the SDK sends the tool
// definitions, the model's tool_use blocks run on real tasks, and the next
// request carries one tool_result per block with the exact results; a bad
// argument's error text comes back with is_error.
func TestMessagesLoop(t *testing.T) {
	f := adaptertest.NewFixture(t)
	uses := []toolUse{
		{"toolu_1", "list_tasks", `{"status":["completed"]}`},
		{"toolu_2", "get_task", `{"task_id":"` + f.Fetch + `"}`},
		{"toolu_3", "cancel_task", `{"target":{"relation":"child","name":"crawler"}}`},
		{"toolu_4", "list_tasks", `{"state":"completed"}`},
	}
	model, client := newScriptedModel(t, "/v1/messages", messageReply(uses, "Let me look."), messageReply(nil, "The crawler is cancelled."))
	ts, err := bganthropic.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}

	params := anthropic.MessageNewParams{
		Model:     "scripted",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Stop the crawler."))},
		Tools:     ts.MessageTools(),
	}
	var final string
	for turn := 0; ; turn++ {
		if turn == 3 {
			t.Fatal("the loop did not end")
		}
		msg, err := client.Messages.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			final = msg.Content[0].Text
			break
		}
		results, err := ts.AnswerMessage(f.CallCtx, msg)
		if err != nil {
			t.Fatal(err)
		}
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
	}
	if final != "The crawler is cancelled." {
		t.Errorf("final answer %q", final)
	}
	f.CheckCrawlerCanceled(t)

	defs := model.Request(0)["tools"].([]any)
	tools := agent.Tools(f.Owner)
	if len(defs) != len(tools) {
		t.Fatalf("%d tool definitions sent, want %d", len(defs), len(tools))
	}
	for i, tool := range tools {
		def := defs[i].(map[string]any)
		var want any
		if err := json.Unmarshal(tool.Schema, &want); err != nil {
			t.Fatal(err)
		}
		if def["name"] != tool.Name || def["description"] != tool.Description || !adaptertest.JSONEqual(def["input_schema"], want) {
			t.Errorf("definition %d: %v\nwant %s with its description and schema", i, def, tool.Name)
		}
	}

	msgs := model.Request(1)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3", len(msgs))
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	want := []struct {
		text    string
		isError bool
	}{
		{f.Direct(t, "list_tasks", `{"status":["completed"]}`), false},
		{f.Direct(t, "get_task", `{"task_id":"`+f.Fetch+`"}`), false},
		{`{"status":"accepted","root_task_id":"` + f.Crawler + `","cancelled_count":1}`, false},
		{`invalid arguments: unknown field "state"`, true},
	}
	if len(results) != len(want) {
		t.Fatalf("%d tool results, want %d", len(results), len(want))
	}
	for i, w := range want {
		got := results[i].(map[string]any)
		wantBlock := map[string]any{"type": "tool_result", "tool_use_id": uses[i].id, "is_error": w.isError,
			"content": []any{map[string]any{"type": "text", "text": w.text}}}
		if !adaptertest.JSONEqual(got, wantBlock) {
			t.Errorf("result %d: %v\nwant %v", i, got, wantBlock)
		}
	}
}

// Every tool_use of a reply is answered, in order: one of a tool the
// Toolset does not have (a name the model made up) with is_error and the
// tools' names, for the model to correct, so that the conversation never
// holds a tool_use without its tool_result. A closed Manager is the
// host's error, not the model's: the block is answered that the call
// failed, and the error returned.
func TestAnswerUnknownToolAndClosed(t *testing.T) {
	f := adaptertest.NewFixture(t)
	ts, err := bganthropic.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	msg := message(t, toolUse{"toolu_1", "web_search", `{"q":"go"}`}, toolUse{"toolu_2", "get_task", `{"task_id":"task_unknown"}`})
	blocks, err := ts.AnswerMessage(f.CallCtx, msg)
	ids, texts, isError := results(blocks)
	if err != nil || !slices.Equal(ids, []string{"toolu_1", "toolu_2"}) || !slices.Equal(texts, []string{
		`unknown tool "web_search": the tools are list_tasks, get_task, cancel_task, send_message, wait_task`,
		"task not found: task_unknown",
	}) || !slices.Equal(isError, []bool{true, true}) {
		t.Fatalf("results for %q: %q, is_error %v, %v; want both answered in order, the made-up tool's with the tools' names", ids, texts, isError, err)
	}

	var results []anthropic.ContentBlockParamUnion
	if err := f.M.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	results, err = ts.AnswerMessage(f.CallCtx, message(t, toolUse{"toolu_9", "cancel_task", `{"target":{"relation":"self"}}`}))
	if want := "bganthropic: cancel_task (tool_use toolu_9): bgtask: manager closed"; err == nil || err.Error() != want || !errors.Is(err, bgtask.ErrClosed) {
		t.Errorf("after shutdown: %v; want %s", err, want)
	}
	if len(results) != 1 || results[0].OfToolResult.ToolUseID != "toolu_9" || !results[0].OfToolResult.IsError.Value ||
		results[0].OfToolResult.Content[0].OfText.Text != "tool call failed: the host could not run it" {
		t.Errorf("after shutdown: %d results, want toolu_9 answered that the call failed", len(results))
	}
}

// Each MessageTools call returns new definitions: a host that marks the last one
// for caching does not change the next request's.
func TestToolsAreCopies(t *testing.T) {
	f := adaptertest.NewFixture(t)
	ts, err := bganthropic.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	first := ts.MessageTools()
	first[len(first)-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	first[0].OfTool.Name = "renamed"
	second := ts.MessageTools()
	if second[0].OfTool.Name != "list_tasks" || !param.IsOmitted(second[len(second)-1].OfTool.CacheControl) {
		t.Errorf("the second MessageTools call sees the first one's changes: %s, %v", second[0].OfTool.Name, second[len(second)-1].OfTool.CacheControl)
	}
}
