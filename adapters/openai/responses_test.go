package bgopenai_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	bgopenai "github.com/bgtask/bgtask/adapters/openai"
)

func responsesReply(id string, calls []scriptedCall, text string) string {
	var output []any
	for _, c := range calls {
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + c.id, "call_id": c.id,
			"name": c.name, "arguments": c.args, "status": "completed"})
	}
	if text != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	b, _ := json.Marshal(map[string]any{"id": id, "object": "response", "created_at": 0, "model": "scripted",
		"status": "completed", "output": output})
	return string(b)
}

// The same loop on the Responses API, strict off: function_call items are
// answered with function_call_output items carrying the exact results.
func TestResponsesLoop(t *testing.T) {
	f := adaptertest.NewFixture(t)
	calls := modelCalls(f)
	model, client := newScriptedModel(t, "/responses", responsesReply("resp_1", calls, ""),
		responsesReply("resp_2", nil, "The crawler is cancelled."))
	ts, err := bgopenai.New(agent.Tools(f.Owner), bgopenai.WithStrict(false))
	if err != nil {
		t.Fatal(err)
	}

	params := responses.ResponseNewParams{
		Model: "scripted",
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Stop the crawler.")},
		Tools: ts.ResponseTools(),
	}
	var final string
	for turn := 0; ; turn++ {
		if turn == 3 {
			t.Fatal("the loop did not end")
		}
		resp, err := client.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		answers, err := ts.AnswerResponse(f.CallCtx, resp)
		if err != nil {
			t.Fatal(err)
		}
		if len(answers) == 0 {
			final = resp.OutputText()
			break
		}
		params.PreviousResponseID = param.NewOpt(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: answers}
	}
	if final != "The crawler is cancelled." {
		t.Errorf("final answer %q", final)
	}
	f.CheckCrawlerCanceled(t)

	checkDefinitions(t, f.Owner, false, model.Request(0)["tools"].([]any), func(def map[string]any) (string, string, any, any) {
		if def["type"] != "function" {
			t.Errorf("tool type %v", def["type"])
		}
		name, _ := def["name"].(string)
		desc, _ := def["description"].(string)
		return name, desc, def["parameters"], def["strict"]
	})
	req := model.Request(1)
	input := req["input"].([]any)
	if req["previous_response_id"] != "resp_1" || len(input) != len(calls) {
		t.Fatalf("second request: previous_response_id %v, %d input items; want resp_1, %d", req["previous_response_id"], len(input), len(calls))
	}
	for i, want := range wantAnswers(t, f) {
		got := input[i].(map[string]any)
		if got["type"] != "function_call_output" || got["call_id"] != calls[i].id || got["output"] != want {
			t.Errorf("answer %d: %v\nwant type function_call_output, call_id %s, output %s", i, got, calls[i].id, want)
		}
	}
}

// Every function_call of a response is answered, in order: one of a tool
// the Toolset does not have (a name the model made up) with an error
// naming the tools, so that the next request holds no call without its
// output.
func TestAnswerResponseUnknownTool(t *testing.T) {
	f := adaptertest.NewFixture(t)
	ts, err := bgopenai.New(agent.Tools(f.Owner))
	if err != nil {
		t.Fatal(err)
	}
	var resp responses.Response
	if err := json.Unmarshal([]byte(responsesReply("resp_1", []scriptedCall{
		{"call_1", "get_task", `{"task_id":"task_unknown"}`},
		{"call_2", "get_tasks", `{}`},
	}, "")), &resp); err != nil {
		t.Fatal(err)
	}
	items, err := ts.AnswerResponse(f.CallCtx, &resp)
	var ids, texts []string
	for _, it := range items {
		ids, texts = append(ids, it.OfFunctionCallOutput.CallID.Value), append(texts, it.OfFunctionCallOutput.Output.OfString.Value)
	}
	if err != nil || !slices.Equal(ids, []string{"call_1", "call_2"}) || !slices.Equal(texts, []string{
		"task not found: task_unknown",
		`unknown tool "get_tasks": the tools are list_tasks, get_task, cancel_task, send_message, wait_task`,
	}) {
		t.Fatalf("outputs for %q: %q, %v; want both answered in order, the made-up tool's with the tools' names", ids, texts, err)
	}
}
