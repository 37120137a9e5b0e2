package scripted

import (
	"encoding/json"
	"testing"
)

// The user's text becomes these tool calls, in order.
func TestCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{"research lsm trees", `research {"question":null,"steps":3,"topic":"lsm trees"}`},
		{"research lsm trees in 2 steps asking which fanout?", `research {"question":"which fanout?","steps":2,"topic":"lsm trees"}`},
		{"research lsm trees in 5 steps; list", `research {"question":null,"steps":5,"topic":"lsm trees"} list_tasks {"cursor":null,"limit":null,"status":null,"tag":null,"type":null}`},
		{"lookup the capital of France", `lookup {"query":"the capital of France"}`},
		{"get task_1; wait task_2", `get_task {"task_id":"task_1"} wait_task {"task_id":"task_2","timeout_seconds":null}`},
		{"cancel research-x", `cancel_task {"reason":"the user asked","target":{"name":"research-x","relation":"child"}}`},
		{"hello there", ``},
		{"research", ``},
		{"list everything", ``},
	} {
		got := ""
		for i, c := range commands(tc.text) {
			if i > 0 {
				got += " "
			}
			got += c.Function.Name + " " + c.Function.Arguments
		}
		if got != tc.want {
			t.Errorf("%q: %s, want %s", tc.text, got, tc.want)
		}
	}
}

// The reply reads past bgtask's envelopes to the user's words or to the
// tools' answers.
func TestReply(t *testing.T) {
	t.Parallel()
	msg := func(role, text string) message {
		b, _ := json.Marshal(text)
		return message{Role: role, Content: b}
	}
	call := message{Role: "assistant"}
	call.ToolCalls = make([]ToolCall, 1)
	call.ToolCalls[0].ID, call.ToolCalls[0].Function.Name = "c1", "research"
	answer := msg("tool", `{"status":"started"}`)
	answer.ToolCallID = "c1"
	for _, tc := range []struct {
		name string
		msgs []message
		want string
	}{
		{"events after the user's words", []message{msg("system", "s"), msg("user", "hi"),
			msg("user", `<background-task-event nonce="n" kind="completed">{}</background-task-event>`),
			msg("user", `<background-tasks nonce="n">`)}, "ok: 1 background events"},
		{"after the tools", []message{msg("user", "research x"), call, answer,
			msg("user", `<background-task-event nonce="n">{}</background-task-event>`)}, `done: [research] {"status":"started"}`},
	} {
		content, calls := reply(tc.msgs)
		if content != tc.want || len(calls) != 0 {
			t.Errorf("%s: %q %v, want %q", tc.name, content, calls, tc.want)
		}
	}
	_, calls := reply([]message{msg("user", "research x"), msg("user", `<background-tasks nonce="n">`)})
	if len(calls) != 1 || calls[0].Function.Name != "research" {
		t.Errorf("a command before the task view: %+v, want one research call", calls)
	}
}
