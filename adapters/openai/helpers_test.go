package bgopenai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// newScriptedModel starts a scripted model server answering path with
// replies, and a client of the SDK that talks to it.
func newScriptedModel(t *testing.T, path string, replies ...string) (*adaptertest.ScriptedModel, openai.Client) {
	t.Helper()
	sm := adaptertest.NewScriptedModel(t, path, replies...)
	return sm, clientOf(sm)
}

// clientOf returns a client of the SDK that talks to sm.
func clientOf(sm *adaptertest.ScriptedModel) openai.Client {
	return openai.NewClient(option.WithBaseURL(sm.Server.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(sm.Server.Client()), option.WithMaxRetries(0))
}

// checkDefinitions checks that defs, the tool definitions a request sent
// (as decoded JSON), are the owner's tools in order, each with its
// description and its schema (as JSON values, whatever their key order),
// and strict as wantStrict. get picks a definition's name, description, parameters
// and strict flag.
func checkDefinitions(t *testing.T, owner bgtask.Owner, wantStrict bool, defs []any, get func(def map[string]any) (name, desc string, params, strict any)) {
	t.Helper()
	tools := agent.Tools(owner)
	if len(defs) != len(tools) {
		t.Fatalf("%d tool definitions sent, want %d", len(defs), len(tools))
	}
	for i, tool := range tools {
		def, _ := defs[i].(map[string]any)
		name, desc, params, strict := get(def)
		var want any
		if err := json.Unmarshal(tool.Schema, &want); err != nil {
			t.Fatal(err)
		}
		if name != tool.Name || desc != tool.Description || !adaptertest.JSONEqual(params, want) || strict != wantStrict {
			t.Errorf("definition %d: name %q, description equal %v, schema equal %v, strict %v; want %s, its schema, strict %v",
				i, name, desc == tool.Description, adaptertest.JSONEqual(params, want), strict, tool.Name, wantStrict)
		}
	}
}

// newCheckingModel starts a model server answering path with replies, in
// order, that first checks each request's body with check, as the
// provider does: a request check refuses gets a 400 with the reason (and
// uses no reply). It returns a client of the SDK that talks to it.
func newCheckingModel(t *testing.T, path string, check func(req map[string]any) error, replies ...string) openai.Client {
	t.Helper()
	srv := adaptertest.NewCheckingModel(t, path, check, func(typ, message string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ}})
		return string(b)
	}, replies...)
	return openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
}

// checkChat checks a Chat Completions request's messages as the API does:
// known roles, text content where it is required, and the tool messages
// that answer an assistant message's tool_calls right after it, one per
// call id, none elsewhere.
func checkChat(req map[string]any) error {
	msgs, _ := req["messages"].([]any)
	if len(msgs) == 0 {
		return errors.New("messages: empty")
	}
	var open map[string]bool // the tool calls waiting for their tool message
	for i, raw := range msgs {
		m, _ := raw.(map[string]any)
		role, _ := m["role"].(string)
		if role == "tool" {
			id, _ := m["tool_call_id"].(string)
			if !open[id] {
				return fmt.Errorf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (%q)", i, id)
			}
			delete(open, id)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id' (%d left)", i, len(open))
		}
		switch role {
		case "system", "developer", "user":
			if s, _ := m["content"].(string); s == "" {
				return fmt.Errorf("messages[%d]: %s content must be non-empty text", i, role)
			}
		case "assistant":
			calls, _ := m["tool_calls"].([]any)
			open = make(map[string]bool, len(calls))
			for _, c := range calls {
				id, _ := c.(map[string]any)["id"].(string)
				open[id] = true
			}
		default:
			return fmt.Errorf("messages[%d]: unknown role %q", i, role)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("messages: %d tool calls with no tool message", len(open))
	}
	return nil
}
