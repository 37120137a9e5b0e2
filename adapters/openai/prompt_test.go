package bgopenai_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	bgopenai "github.com/bgtask/bgtask/adapters/openai"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// roles returns each message's role and text, as sent.
func roles(t *testing.T, v any) (rs, texts []string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []struct{ Role, Content string }
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		rs, texts = append(rs, m.Role), append(texts, m.Content)
	}
	return rs, texts
}

// ChatPrompt and ResponsePrompt keep the system role for the Plugin's
// instructions only: events, a task's messages (even one that claims the
// system role) and the task list are user messages; empty ones are left out.
func TestPromptRoles(t *testing.T) {
	t.Parallel()
	wantRoles := "user user system user"
	wantTexts := []string{adaptertest.EventText, adaptertest.ForgedText, adaptertest.InstructionsText, adaptertest.ViewText}
	for name, got := range map[string]any{
		"chat":      bgopenai.ChatPrompt(adaptertest.PluginMessages()),
		"responses": bgopenai.ResponsePrompt(adaptertest.PluginMessages()),
	} {
		rs, texts := roles(t, got)
		if strings.Join(rs, " ") != wantRoles || strings.Join(texts, "\n") != strings.Join(wantTexts, "\n") {
			t.Errorf("%s: roles %q, texts %q\nwant %s, %q", name, rs, texts, wantRoles, wantTexts)
		}
	}
	if got := bgopenai.ChatPrompt(nil); len(got) != 0 {
		t.Errorf("ChatPrompt(nil) = %v", got)
	}
	items := bgopenai.ResponsePrompt(adaptertest.PluginMessages()[:1])
	if m := items[0].OfMessage; m == nil || m.Role != responses.EasyInputMessageRoleUser {
		t.Errorf("ResponsePrompt: %+v, want an easy input message of the user", items[0])
	}
}

// A Chat Completions turn with the Plugin's messages: the tool messages
// right after the assistant message, then the events, then the
// instructions and task list for this request only; a server that checks
// the messages as the API does takes both requests, and refuses the same
// messages with the events before the tool messages.
func TestChatPromptRequest(t *testing.T) {
	t.Parallel()
	f := adaptertest.NewFixture(t)
	calls := []scriptedCall{{"call_1", "list_tasks", `{"status":["completed"]}`}, {"call_2", "get_task", `{"task_id":"` + f.Fetch + `"}`}}
	client := newCheckingModel(t, "/chat/completions", checkChat, chatReply(calls, ""), chatReply(nil, "Done."))
	ts, err := bgopenai.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	keep, once := adaptertest.Durable(adaptertest.PluginMessages())
	history := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a helpful agent."), openai.UserMessage("What is done?")}
	params := openai.ChatCompletionNewParams{Model: "scripted", Tools: ts.ChatTools(),
		Messages: append(history[:len(history):len(history)], bgopenai.ChatPrompt(once)...)}
	resp, err := client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	answers, err := ts.AnswerChat(f.CallCtx, msg)
	if err != nil {
		t.Fatal(err)
	}
	history = append(append(append(history, msg.ToParam()), answers...), bgopenai.ChatPrompt(keep)...)

	wrong := append(append(append(history[:2:2], msg.ToParam()), bgopenai.ChatPrompt(keep)...), answers...)
	params.Messages = wrong
	_, err = client.Chat.Completions.New(t.Context(), params)
	if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "must be followed by tool messages") {
		t.Fatalf("events before the tool messages: %v, want the server to refuse them", err)
	}

	params.Messages = append(history[:len(history):len(history)], bgopenai.ChatPrompt(once)...)
	rs, texts := roles(t, params.Messages)
	if want := "system user assistant tool tool user user system user"; strings.Join(rs, " ") != want {
		t.Errorf("roles %q, want %s", rs, want)
	}
	if texts[5] != adaptertest.EventText || texts[7] != adaptertest.InstructionsText || texts[8] != adaptertest.ViewText {
		t.Errorf("texts %q", texts[5:])
	}
	resp, err = client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Done." {
		t.Errorf("final answer %q", resp.Choices[0].Message.Content)
	}
}

// checkResponses returns a check of Responses requests as the API does,
// for a model whose replies are replies: a request that continues a
// response (previous_response_id) gives one function_call_output for each
// of its function calls and no other, and its input messages have a known
// role and text.
func checkResponses(t *testing.T, replies ...string) func(req map[string]any) error {
	calls := map[string][]string{} // a response's function call ids
	for _, r := range replies {
		var resp responses.Response
		if err := json.Unmarshal([]byte(r), &resp); err != nil {
			t.Fatal(err)
		}
		for _, item := range resp.Output {
			if item.Type == "function_call" {
				calls[resp.ID] = append(calls[resp.ID], item.CallID)
			}
		}
	}
	return func(req map[string]any) error {
		open := map[string]bool{}
		prev, _ := req["previous_response_id"].(string)
		for _, id := range calls[prev] {
			open[id] = true
		}
		input, _ := req["input"].([]any)
		for i, raw := range input {
			item, _ := raw.(map[string]any)
			switch item["type"] {
			case "function_call_output":
				id, _ := item["call_id"].(string)
				if !open[id] {
					return fmt.Errorf("input[%d]: No tool call found for function call output with call_id %s.", i, id)
				}
				delete(open, id)
			case "message", nil:
				switch item["role"] {
				case "user", "system", "developer", "assistant":
				default:
					return fmt.Errorf("input[%d].role: invalid value %v", i, item["role"])
				}
				if s, _ := item["content"].(string); s == "" {
					return fmt.Errorf("input[%d].content: empty text", i)
				}
			default:
				return fmt.Errorf("input[%d].type: unexpected %v", i, item["type"])
			}
		}
		for id := range open {
			return fmt.Errorf("No tool output found for function call %s.", id)
		}
		return nil
	}
}

// A Responses turn with the Plugin's messages: the function_call_output
// items, then the events and, for this request only, the instructions
// and the task list; a server that checks the input as the API does
// takes it, and refuses it with an output left out.
func TestResponsePromptRequest(t *testing.T) {
	t.Parallel()
	f := adaptertest.NewFixture(t)
	calls := []scriptedCall{{"call_1", "list_tasks", `{"status":["completed"]}`}, {"call_2", "get_task", `{"task_id":"` + f.Fetch + `"}`}}
	replies := []string{responsesReply("resp_1", calls, ""), responsesReply("resp_2", nil, "Done.")}
	client := newCheckingModel(t, "/responses", checkResponses(t, replies...), replies...)
	ts, err := bgopenai.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	keep, once := adaptertest.Durable(adaptertest.PluginMessages())
	params := responses.ResponseNewParams{Model: "scripted", Tools: ts.ResponseTools(),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: append(
			responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is done?", responses.EasyInputMessageRoleUser)},
			bgopenai.ResponsePrompt(once)...)}}
	resp, err := client.Responses.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	outputs, err := ts.AnswerResponse(f.CallCtx, resp)
	if err != nil {
		t.Fatal(err)
	}
	params.PreviousResponseID = param.NewOpt(resp.ID)

	params.Input.OfInputItemList = append(outputs[:1:1], bgopenai.ResponsePrompt(keep)...)
	_, err = client.Responses.New(t.Context(), params)
	if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != 400 || apiErr.Message != "No tool output found for function call call_2." {
		t.Fatalf("an output left out: %v, want the server to refuse it", err)
	}

	input := append(append(outputs[:len(outputs):len(outputs)], bgopenai.ResponsePrompt(keep)...), bgopenai.ResponsePrompt(once)...)
	params.Input.OfInputItemList = input
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	var sent []struct {
		Type, Role string
		CallID     string `json:"call_id"`
	}
	if err := json.Unmarshal(b, &sent); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range sent {
		got = append(got, it.Type+" "+it.Role+it.CallID)
	}
	if want := "function_call_output call_1, function_call_output call_2, message user, message user, message system, message user"; strings.Join(got, ", ") != want {
		t.Errorf("input %q\nwant %s", got, want)
	}
	resp, err = client.Responses.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Done." {
		t.Errorf("final answer %q", resp.OutputText())
	}
}
