package bgmcp_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// twoQuestions is a tool whose task asks two questions at once, one per
// goroutine, and returns both answers.
var twoQuestions = bgmcp.Tool{
	Name: "two_questions", Description: "Asks a name and a colour at once.", InputSchema: echoSchema, TaskSupport: bgmcp.TaskRequired,
	Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
		task, _ := call.Task()
		ctx, cancel := context.WithCancelCause(ctx) // one question failing withdraws the other
		defer cancel(nil)
		questions := []string{"name?", "colour?"}
		answers := make([]string, len(questions))
		var wg sync.WaitGroup
		for i, q := range questions {
			wg.Go(func() {
				a, err := task.RequestInput(ctx, q)
				if err != nil {
					cancel(err)
				}
				answers[i] = a.Content
			})
		}
		wg.Wait()
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		return map[string]string{"name": answers[0], "colour": answers[1]}, nil
	},
}

// A task with two questions open shows both in inputRequests; tasks/update
// may answer one of them (the other stays, the answered one is gone at
// once), an answer to a key answered already or unknown is acknowledged and
// ignored, a bad action refuses the whole update and hands nothing over,
// and another caller reaches none of it.
func TestModernInputSeveral(t *testing.T) {
	s := newServer(t, newManager(t), nil, bgmcp.WithOwnerFunc(userOwner))
	if err := s.AddTool(twoQuestions); err != nil {
		t.Fatal(err)
	}
	url := modernServer(t, s, true)
	alice := &modernClient{t: t, url: url, token: "a", tasks: true}
	bob := &modernClient{t: t, url: url, token: "b", tasks: true}
	tk := alice.start("two_questions", map[string]any{"text": "x"})
	var got modernTask
	for got.Status == "" || got.Status == "working" || got.Status == "input_required" && len(got.InputRequests) < 2 {
		got = alice.get(tk.TaskID) // until both goroutines asked, or the task ended
	}
	keyOf := map[string]string{} // by question
	for k, r := range got.InputRequests {
		if r.Method != "elicitation/create" || r.Params.Mode != "form" || string(r.Params.RequestedSchema) != wantSchema {
			t.Errorf("input request %s: %+v", k, r)
		}
		keyOf[r.Params.Message] = k
	}
	if got.Status != "input_required" || len(keyOf) != 2 || keyOf["name?"] == "" || keyOf["colour?"] == "" {
		t.Fatalf("asking: %+v", got)
	}
	name, colour := keyOf["name?"], keyOf["colour?"]
	accept := func(answer string) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}
	}

	if e := bob.fail("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{name: accept("Mallory")}}); e.Code != -32602 || e.Message != "Task not found: "+tk.TaskID {
		t.Errorf("bob's update: %+v", e)
	}
	for _, step := range []struct {
		name      string
		responses map[string]any
		errMsg    string   // the update's error, if it fails
		open      []string // the questions still open after it
	}{
		{"a bad action with a good answer", map[string]any{name: accept("Ann"), colour: map[string]any{"action": "maybe"}},
			fmt.Sprintf("input response %q: unknown action \"maybe\" (want accept, decline or cancel)", colour), []string{"colour?", "name?"}},
		{"none outstanding", map[string]any{"input_unknown": accept("?"), "not-a-response": map[string]any{"x": 1}}, "", []string{"colour?", "name?"}},
		{"one of the two", map[string]any{name: accept("Ann"), "input_unknown": map[string]any{"action": "decline"}}, "", []string{"colour?"}},
		{"the answered one again", map[string]any{name: accept("Bea")}, "", []string{"colour?"}},
	} {
		r := alice.post("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": step.responses})
		switch {
		case step.errMsg != "" && (r.err == nil || r.err.Code != -32602 || r.err.Message != step.errMsg):
			t.Errorf("%s: %d %s, want the error %q", step.name, r.status, r.body, step.errMsg)
		case step.errMsg == "" && (r.err != nil || r.result == nil):
			t.Errorf("%s: %d %s, want an acknowledgement", step.name, r.status, r.body)
		}
		got := alice.get(tk.TaskID) // at once: the answer is off the record before the ack
		var open []string
		for _, q := range got.InputRequests {
			open = append(open, q.Params.Message)
		}
		slices.Sort(open)
		if got.Status != "input_required" || !slices.Equal(open, step.open) {
			t.Errorf("after %s: %s with %v, want input_required with %v", step.name, got.Status, open, step.open)
		}
	}
	if got := bob.fail("tasks/get", map[string]any{"taskId": tk.TaskID}); got.Message != "Task not found: "+tk.TaskID {
		t.Errorf("bob's get: %+v", got)
	}
	alice.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{colour: accept("teal")}})
	got = alice.until(tk.TaskID, "working", "input_required")
	if got.Status != "completed" || string(got.Result.StructuredContent) != `{"colour":"teal","name":"Ann"}` || len(got.InputRequests) != 0 {
		t.Errorf("after both answers: %+v", got)
	}
}
