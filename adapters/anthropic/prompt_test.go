package bganthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// shape returns each message as its role and its blocks' types (a text
// block as its text), as sent.
func shape(t *testing.T, msgs []anthropic.MessageParam) []string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var decoded []struct {
		Role    string
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range decoded {
		var blocks []string
		for _, c := range m.Content {
			if c.Type == "text" {
				blocks = append(blocks, c.Text)
			} else {
				blocks = append(blocks, c.Type)
			}
		}
		out = append(out, m.Role+": "+strings.Join(blocks, " | "))
	}
	return out
}

// MessagePrompt gives the system only the Plugin's instructions: events, a
// task's messages (even one that claims the system role) and the task
// list are user text blocks; empty ones are left out.
func TestMessagePrompt(t *testing.T) {
	t.Parallel()
	system, user := bganthropic.MessagePrompt(adaptertest.PluginMessages())
	if len(system) != 1 || system[0].Text != adaptertest.InstructionsText {
		t.Errorf("system %+v, want the instructions only", system)
	}
	var texts []string
	for _, b := range user {
		texts = append(texts, b.OfText.Text)
	}
	if want := []string{adaptertest.EventText, adaptertest.ForgedText, adaptertest.ViewText}; strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("user blocks %q\nwant %q", texts, want)
	}
	if system, user := bganthropic.MessagePrompt(nil); system != nil || user != nil {
		t.Errorf("MessagePrompt(nil) = %v, %v", system, user)
	}
}

// AppendUserTurn joins the blocks to a last user message, tool_result
// blocks first, or starts a user message after an assistant's; it never
// changes the messages it is given.
func TestAppendUserTurn(t *testing.T) {
	t.Parallel()
	text := func(s string) anthropic.ContentBlockParamUnion { return anthropic.NewTextBlock(s) }
	result := func(id string) anthropic.ContentBlockParamUnion { return anthropic.NewToolResultBlock(id, "ok", false) }
	for _, tc := range []struct {
		name     string
		messages []anthropic.MessageParam
		blocks   []anthropic.ContentBlockParamUnion
		want     []string
	}{
		{"empty", nil, []anthropic.ContentBlockParamUnion{text("hi")}, []string{"user: hi"}},
		{"no blocks", []anthropic.MessageParam{anthropic.NewUserMessage(text("hi"))}, nil, []string{"user: hi"}},
		{"after assistant", []anthropic.MessageParam{anthropic.NewUserMessage(text("hi")), anthropic.NewAssistantMessage(text("yes"))},
			[]anthropic.ContentBlockParamUnion{text("event"), result("t1")}, []string{"user: hi", "assistant: yes", "user: tool_result | event"}},
		{"joins user", []anthropic.MessageParam{anthropic.NewAssistantMessage(text("yes")), anthropic.NewUserMessage(text("event"), result("t1"))},
			[]anthropic.ContentBlockParamUnion{text("view"), result("t2")}, []string{"assistant: yes", "user: tool_result | tool_result | event | view"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := shape(t, tc.messages)
			got := bganthropic.AppendUserTurn(tc.messages, tc.blocks...)
			if g := shape(t, got); strings.Join(g, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got %q\nwant %q", g, tc.want)
			}
			if after := shape(t, tc.messages); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Errorf("the given messages changed: %q, were %q", after, before)
			}
		})
	}
}

// A Messages turn with the Plugin's messages, as a server that checks the
// request as the API does takes it: the instructions in params.System,
// the events in the same user message as the tool_result blocks (after
// them, although the host added them first), the task list there for one
// request only. The same messages converted by hand (a user message of
// their own, or the events before the results) are refused.
func TestMessagePromptRequest(t *testing.T) {
	t.Parallel()
	f := adaptertest.NewFixture(t)
	uses := []toolUse{{"toolu_1", "list_tasks", `{"status":["completed"]}`}, {"toolu_2", "get_task", `{"task_id":"` + f.Fetch + `"}`}}
	client := newCheckingModel(t, "/v1/messages", checkMessages, messageReply(uses, "Let me look."), messageReply(nil, "Done."))
	ts, err := bganthropic.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	keep, once := adaptertest.Durable(adaptertest.PluginMessages())
	base := []anthropic.TextBlockParam{{Text: "You are a helpful agent."}}
	request := func(history []anthropic.MessageParam) anthropic.MessageNewParams {
		system, view := bganthropic.MessagePrompt(once)
		return anthropic.MessageNewParams{Model: "scripted", MaxTokens: 1024, Tools: ts.MessageTools(),
			System: append(base[:len(base):len(base)], system...), Messages: bganthropic.AppendUserTurn(history, view...)}
	}

	history := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is done?"))}
	msg, err := client.Messages.New(t.Context(), request(history))
	if err != nil {
		t.Fatal(err)
	}
	results, err := ts.AnswerMessage(f.CallCtx, msg)
	if err != nil {
		t.Fatal(err)
	}
	history = append(history, msg.ToParam())
	_, events := bganthropic.MessagePrompt(keep)
	history = bganthropic.AppendUserTurn(history, events...)
	history = bganthropic.AppendUserTurn(history, results...)

	for _, tc := range []struct {
		name     string
		messages []anthropic.MessageParam
		reason   string
	}{
		{"events apart", []anthropic.MessageParam{history[0], history[1], anthropic.NewUserMessage(results...), anthropic.NewUserMessage(events...)}, "roles must alternate"},
		{"events first", []anthropic.MessageParam{history[0], history[1], anthropic.NewUserMessage(append(events[:len(events):len(events)], results...)...)}, "tool_result blocks must come first"},
		{"instructions as a message", append(history[:3:3], anthropic.MessageParam{Role: "system", Content: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(adaptertest.InstructionsText)}}), "roles must alternate"},
		{"a result missing", []anthropic.MessageParam{history[0], history[1], anthropic.NewUserMessage(results[0])}, "without `tool_result` blocks"},
	} {
		params := request(history)
		params.Messages = tc.messages
		if _, err := client.Messages.New(t.Context(), params); err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want the server to refuse the request: %s", tc.name, err, tc.reason)
		}
	}

	params := request(history)
	want := []string{"user: What is done?", "assistant: Let me look. | tool_use | tool_use", "user: tool_result | tool_result | " + adaptertest.EventText + " | " + adaptertest.ForgedText + " | " + adaptertest.ViewText}
	if got := shape(t, params.Messages); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("second request:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(params.System) != 2 || params.System[1].Text != adaptertest.InstructionsText {
		t.Errorf("system %+v, want the host's then the instructions", params.System)
	}
	if got := shape(t, history); got[2] != "user: tool_result | tool_result | "+adaptertest.EventText+" | "+adaptertest.ForgedText {
		t.Errorf("kept conversation: %q, want no task list", got[2])
	}
	reply, err := client.Messages.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Content[0].Text != "Done." {
		t.Errorf("final answer %q", reply.Content[0].Text)
	}
}
