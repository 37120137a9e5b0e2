package bgopenai_test

import (
	"testing"

	"github.com/openai/openai-go/v3"

	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// chatToolResults returns the contents of the tool messages after the last
// assistant message of a Chat Completions request: what the model reads
// of its previous calls.
func chatToolResults(req map[string]any) []string {
	msgs, _ := req["messages"].([]any)
	var out []string
	for _, raw := range msgs {
		m, _ := raw.(map[string]any)
		switch m["role"] {
		case "assistant":
			out = nil
		case "tool":
			content, _ := m["content"].(string)
			out = append(out, content)
		}
	}
	return out
}

// The model chooses the background per call through the Chat Completions
// API (issue 33): build in the foreground, in the background, and a
// foreground call that prints, is promoted, and whose output the model
// reads in three increments, every byte once. The host's code is the loop
// any Toolset host has: nothing more for the background.
func TestChatBackgroundPerCall(t *testing.T) {
	s := adaptertest.NewBackgroundScenario(t)
	var results [][]string
	model := adaptertest.NewScriptedModelFunc(t, "/chat/completions", adaptertest.Turns, func(i int, req map[string]any) string {
		if i > 0 {
			results = append(results, chatToolResults(req))
		}
		calls := s.Calls(t, i, chatToolResults(req))
		if calls == nil {
			return chatReply(nil, adaptertest.FinalAnswer)
		}
		sc := make([]scriptedCall, len(calls))
		for j, c := range calls {
			sc[j] = scriptedCall{c.ID, c.Name, c.Args}
		}
		return chatReply(sc, "")
	})
	client := clientOf(model)
	ts, err := bgopenai.New(s.Tools)
	if err != nil {
		t.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Build lib, app and all.")},
		Tools:    ts.ChatTools(),
	}
	var final string
	for turn := 0; ; turn++ {
		if turn == adaptertest.Turns {
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
		answers, err := ts.AnswerChat(s.CallCtx, msg)
		if err != nil {
			t.Fatal(err)
		}
		params.Messages = append(append(params.Messages, msg.ToParam()), answers...)
	}
	if final != adaptertest.FinalAnswer {
		t.Errorf("final answer %q", final)
	}
	s.Check(t, results)
	// The definition the model got is the wrapped tool's: the boolean in
	// a strict schema.
	defs := model.Request(0)["tools"].([]any)
	fn := defs[len(defs)-1].(map[string]any)["function"].(map[string]any)
	params0, _ := fn["parameters"].(map[string]any)
	props, _ := params0["properties"].(map[string]any)
	if fn["name"] != "build" || fn["strict"] != true || props[agent.BackgroundParam] == nil {
		t.Errorf("build's definition: %v", fn)
	}
}
