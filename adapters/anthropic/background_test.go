package bganthropic_test

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	bganthropic "github.com/bgtask/bgtask/adapters/anthropic"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// toolResults returns the texts of the tool_result blocks of a Messages
// request's last message: what the model reads of its previous calls.
func toolResults(req map[string]any) []string {
	msgs, _ := req["messages"].([]any)
	if len(msgs) == 0 {
		return nil
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := last["content"].([]any)
	var out []string
	for _, raw := range blocks {
		b, _ := raw.(map[string]any)
		if b["type"] != "tool_result" {
			continue
		}
		switch c := b["content"].(type) {
		case string:
			out = append(out, c)
		case []any:
			for _, part := range c {
				p, _ := part.(map[string]any)
				text, _ := p["text"].(string)
				out = append(out, text)
			}
		}
	}
	return out
}

// The model chooses the background per call through the Messages API
// (issue 33): build in the foreground, in the background, and a
// foreground call that prints, is promoted, and whose output the model
// reads in three increments, every byte once. The host's loop is the one
// any Toolset host has.
func TestMessagesBackgroundPerCall(t *testing.T) {
	s := adaptertest.NewBackgroundScenario(t)
	var results [][]string
	model := adaptertest.NewScriptedModelFunc(t, "/v1/messages", adaptertest.Turns, func(i int, req map[string]any) string {
		if i > 0 {
			results = append(results, toolResults(req))
		}
		calls := s.Calls(t, i, toolResults(req))
		if calls == nil {
			return messageReply(nil, adaptertest.FinalAnswer)
		}
		uses := make([]toolUse, len(calls))
		for j, c := range calls {
			uses[j] = toolUse{c.ID, c.Name, c.Args}
		}
		return messageReply(uses, "")
	})
	client := anthropic.NewClient(option.WithBaseURL(model.Server.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(model.Server.Client()), option.WithMaxRetries(0))
	ts, err := bganthropic.New(s.Tools)
	if err != nil {
		t.Fatal(err)
	}
	params := anthropic.MessageNewParams{
		Model:     "scripted",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Build lib, app and all."))},
		Tools:     ts.MessageTools(),
	}
	var final string
	for turn := 0; ; turn++ {
		if turn == adaptertest.Turns {
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
		answers, err := ts.AnswerMessage(s.CallCtx, msg)
		if err != nil {
			t.Fatal(err)
		}
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(answers...))
	}
	if final != adaptertest.FinalAnswer {
		t.Errorf("final answer %q", final)
	}
	s.Check(t, results)
	defs := model.Request(0)["tools"].([]any)
	def := defs[len(defs)-1].(map[string]any)
	schema, _ := def["input_schema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if def["name"] != "build" || props[agent.BackgroundParam] == nil {
		t.Errorf("build's definition: %v", def)
	}
}
