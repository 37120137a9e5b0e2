package bganthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// newScriptedModel starts a scripted model server answering path with
// replies, and a client of the SDK that talks to it.
func newScriptedModel(t *testing.T, path string, replies ...string) (*adaptertest.ScriptedModel, anthropic.Client) {
	t.Helper()
	sm := adaptertest.NewScriptedModel(t, path, replies...)
	client := anthropic.NewClient(option.WithBaseURL(sm.Server.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(sm.Server.Client()), option.WithMaxRetries(0))
	return sm, client
}

// newCheckingModel starts a model server answering path with replies, in
// order, that first checks each request's body with check, as the
// provider does: a request check refuses gets a 400 with the reason (and
// uses no reply). It returns a client of the SDK that talks to it.
func newCheckingModel(t *testing.T, path string, check func(req map[string]any) error, replies ...string) anthropic.Client {
	t.Helper()
	srv := adaptertest.NewCheckingModel(t, path, check, func(typ, message string) string {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
		return string(b)
	}, replies...)
	return anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
}

// checkMessages checks a Messages request as the API does: system text
// blocks only in "system"; messages that start with the user and
// alternate user and assistant; no empty text; and after an assistant
// message with tool_use blocks, a user message that starts with one
// tool_result per tool_use, before any other block, and no tool_result
// anywhere else.
func checkMessages(req map[string]any) error {
	if sys, ok := req["system"].([]any); ok {
		for i, b := range sys {
			if b, _ := b.(map[string]any); b["type"] != "text" || b["text"] == "" {
				return fmt.Errorf("system.%d: must be a non-empty text block", i)
			}
		}
	}
	msgs, _ := req["messages"].([]any)
	if len(msgs) == 0 {
		return errors.New("messages: at least one message is required")
	}
	var uses map[string]bool // the tool_use ids the previous assistant message made
	for i, raw := range msgs {
		m, _ := raw.(map[string]any)
		role, _ := m["role"].(string)
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if role != want {
			return fmt.Errorf("messages.%d: roles must alternate between \"user\" and \"assistant\", starting with \"user\" (got %q)", i, role)
		}
		blocks, _ := m["content"].([]any)
		if len(blocks) == 0 {
			return fmt.Errorf("messages.%d: content must not be empty", i)
		}
		answered, others := 0, false
		next := map[string]bool{}
		for j, raw := range blocks {
			b, _ := raw.(map[string]any)
			switch b["type"] {
			case "text":
				if b["text"] == "" {
					return fmt.Errorf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
				}
				others = true
			case "tool_use":
				if role != "assistant" {
					return fmt.Errorf("messages.%d.content.%d: tool_use only in assistant messages", i, j)
				}
				id, _ := b["id"].(string)
				next[id] = true
			case "tool_result":
				id, _ := b["tool_use_id"].(string)
				switch {
				case role != "user" || !uses[id]:
					return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message", i, j, id)
				case others:
					return fmt.Errorf("messages.%d.content.%d: tool_result blocks must come first in the user message, before any other content", i, j)
				}
				delete(uses, id)
				answered++
			default:
				return fmt.Errorf("messages.%d.content.%d: unknown block type %v", i, j, b["type"])
			}
		}
		if len(uses) > 0 {
			return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %d left", i, len(uses))
		}
		uses = next
	}
	if len(uses) > 0 {
		return fmt.Errorf("messages: the last message's tool_use blocks have no tool_result")
	}
	return nil
}
