package bgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// nameTool asks the caller's name in Prepare until a round brings an
// accepted, non-blank one with the round's state, and greets it in Run. Its
// "mode" argument makes Prepare fail, fail at the protocol level, panic, or
// ask nothing.
func nameTool(support string) bgmcp.Tool {
	return bgmcp.Tool{
		Name: "greet_name", Description: "Asks a name, then greets it.", TaskSupport: support,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}}}`),
		Prepare: func(_ context.Context, call *bgmcp.Call) (*bgmcp.InputRequired, error) {
			var args struct{ Mode string }
			_ = json.Unmarshal(call.Arguments, &args)
			switch args.Mode {
			case "fail":
				return nil, errors.New("prepare: no luck")
			case "protocol":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "prepare: bad arguments"}
			case "panic":
				panic("boom")
			case "none":
				return &bgmcp.InputRequired{}, nil
			}
			if answeredName(call) != "" && call.RequestState == "round-1" {
				return nil, nil
			}
			return &bgmcp.InputRequired{Requests: mcp.InputRequestMap{
				"name": &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
			}, State: "round-1"}, nil
		},
		Run: func(_ context.Context, call *bgmcp.Call) (any, error) {
			return map[string]string{"hello": answeredName(call)}, nil
		},
	}
}

// answeredName is the name of an accepted answer to the "name" request.
func answeredName(call *bgmcp.Call) string {
	r, ok := call.InputResponses["name"].(*mcp.ElicitResult)
	if !ok || r.Action != "accept" {
		return ""
	}
	name, _ := r.Content["name"].(string)
	return strings.TrimSpace(name)
}

// A round of input before the task (SEP-2663's composition with input
// rounds): the call answers input_required with no task, again for every
// round that does not answer, and with a task handle once Prepare has its
// answer; the task sees the answer and is its caller's alone.
func TestModernPrepare(t *testing.T) {
	s := newServer(t, newManager(t), nil, bgmcp.WithOwnerFunc(userOwner))
	if err := s.AddTool(nameTool(bgmcp.TaskRequired)); err != nil {
		t.Fatal(err)
	}
	url := modernServer(t, s, true)
	alice := &modernClient{t: t, url: url, token: "a", tasks: true}
	bob := &modernClient{t: t, url: url, token: "b", tasks: true}

	const wantAsk = `{"inputRequests":{"name":{"method":"elicitation/create","params":{"mode":"form","message":"Your name?","requestedSchema":{"properties":{"name":{"type":"string"}},"type":"object"}}}},"requestState":"round-1","resultType":"input_required"}`
	accept := func(name string) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{"name": name}}
	}
	for _, tc := range []struct {
		name   string
		params map[string]any
	}{
		{"first round", map[string]any{}},
		{"no answer", map[string]any{"inputResponses": map[string]any{}, "requestState": "round-1"}},
		{"another key", map[string]any{"inputResponses": map[string]any{"other": accept("Alice")}, "requestState": "round-1"}},
		{"declined", map[string]any{"inputResponses": map[string]any{"name": map[string]any{"action": "decline"}}, "requestState": "round-1"}},
		{"blank name", map[string]any{"inputResponses": map[string]any{"name": accept(" ")}, "requestState": "round-1"}},
		{"no state", map[string]any{"inputResponses": map[string]any{"name": accept("Alice")}}},
		{"another state", map[string]any{"inputResponses": map[string]any{"name": accept("Alice")}, "requestState": "round-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.params["name"], tc.params["arguments"] = "greet_name", map[string]any{}
			if got := stripMeta(t, alice.result("tools/call", tc.params)); got != wantAsk {
				t.Errorf("got %s\nwant %s", got, wantAsk)
			}
		})
	}
	if n := countTasks(t, alice); n != 0 {
		t.Fatalf("%d tasks after the rounds of questions, want none", n)
	}

	var tk modernTask
	raw := alice.result("tools/call", map[string]any{"name": "greet_name", "arguments": map[string]any{},
		"inputResponses": map[string]any{"name": accept("Alice")}, "requestState": "round-1"})
	decode(t, raw, &tk)
	var fields map[string]json.RawMessage
	decode(t, raw, &fields)
	_, hasState := fields["requestState"]
	_, hasRequests := fields["inputRequests"]
	if tk.ResultType != "task" || tk.TaskID == "" || tk.Status != "working" || hasState || hasRequests {
		t.Fatalf("the answered round: %s, want a task handle", raw)
	}
	if got := alice.until(tk.TaskID, "working"); got.Status != "completed" || string(got.Result.StructuredContent) != `{"hello":"Alice"}` {
		t.Errorf("the task: %+v, want it to greet Alice", got)
	}
	if e := bob.fail("tasks/get", map[string]any{"taskId": tk.TaskID}); e.Code != -32602 || e.Message != "Task not found: "+tk.TaskID {
		t.Errorf("bob's tasks/get: %+v", e)
	}
	if n := countTasks(t, bob); n != 0 {
		t.Errorf("bob has %d tasks, want none", n)
	}
}

// What Prepare returns besides questions: an error is the call's tool
// error, a *jsonrpc.Error its protocol error, a panic a tool error, none
// of them making a task; an InputRequired without requests lets the call
// run.
func TestModernPrepareOutcomes(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		code       int64
		task       bool
	}{
		{mode: "fail", want: `{"content":[{"type":"text","text":"prepare: no luck"}],"isError":true,"resultType":"complete"}`},
		{mode: "panic", want: `{"content":[{"type":"text","text":"bgmcp: tool greet_name: Prepare panicked: boom"}],"isError":true,"resultType":"complete"}`},
		{mode: "protocol", code: jsonrpc.CodeInvalidParams, want: "prepare: bad arguments"},
		{mode: "none", task: true, want: `{"hello":""}`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := newServer(t, newManager(t), nil)
			if err := s.AddTool(nameTool(bgmcp.TaskOptional)); err != nil {
				t.Fatal(err)
			}
			c := &modernClient{t: t, url: modernServer(t, s, false), tasks: true}
			params := map[string]any{"name": "greet_name", "arguments": map[string]any{"mode": tc.mode}}
			switch {
			case tc.code != 0:
				if e := c.fail("tools/call", params); int64(e.Code) != tc.code || e.Message != tc.want {
					t.Errorf("%+v, want %d %q", e, tc.code, tc.want)
				}
			case tc.task:
				tk := c.start("greet_name", params["arguments"])
				if got := c.until(tk.TaskID, "working"); got.Status != "completed" || string(got.Result.StructuredContent) != tc.want {
					t.Errorf("%+v, want %s", got, tc.want)
				}
			default:
				if got := stripMeta(t, c.result("tools/call", params)); got != tc.want {
					t.Errorf("got %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

// A 2026-07-28 call in the foreground (no tasks extension declared) has
// the same rounds, the SDK marking them: input_required, then the result.
func TestModernPrepareForeground(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	if err := s.AddTool(nameTool(bgmcp.TaskOptional)); err != nil {
		t.Fatal(err)
	}
	c := &modernClient{t: t, url: modernServer(t, s, false)}
	var ask struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	decode(t, c.result("tools/call", map[string]any{"name": "greet_name", "arguments": map[string]any{}}), &ask)
	if _, ok := ask.InputRequests["name"]; ask.ResultType != "input_required" || !ok || len(ask.InputRequests) != 1 || ask.RequestState != "round-1" {
		t.Fatalf("round 1: %+v", ask)
	}
	var res struct {
		ResultType        string          `json:"resultType"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	decode(t, c.result("tools/call", map[string]any{"name": "greet_name", "arguments": map[string]any{}, "requestState": "round-1",
		"inputResponses": map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Carol"}}}}), &res)
	if res.ResultType != "complete" || string(res.StructuredContent) != `{"hello":"Carol"}` {
		t.Errorf("round 2: %+v", res)
	}
}

// A client of 2025-11-25 knows no input-required result: bgmcp puts
// Prepare's questions to it as elicitation requests, in the foreground and
// before a task is made; a client that cannot answer gets a tool error and
// no task.
func TestPrepareOlderRevision(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	if err := s.AddTool(nameTool(bgmcp.TaskOptional)); err != nil {
		t.Fatal(err)
	}
	c := dialRawCaps(t, s, map[string]any{"elicitation": map[string]any{}})
	// answer answers the one elicitation request a call makes.
	answer := func(name string) {
		t.Helper()
		req := <-c.calls
		var p struct {
			Message string `json:"message"`
		}
		decode(t, req.Params, &p)
		if req.Method != "elicitation/create" || p.Message != "Your name?" {
			t.Errorf("the server asked %s %s", req.Method, req.Params)
		}
		c.reply(req, map[string]any{"action": "accept", "content": map[string]any{"name": name}}, nil)
	}

	fg := c.send("tools/call", map[string]any{"name": "greet_name", "arguments": map[string]any{}})
	answer("Dave")
	res, rpcErr := response(<-fg)
	var p payload
	if decode(t, res, &p); rpcErr != nil || p.IsError || string(p.StructuredContent) != `{"hello":"Dave"}` {
		t.Errorf("foreground: %s %v", res, rpcErr)
	}

	asTask := c.send("tools/call", map[string]any{"name": "greet_name", "arguments": map[string]any{}, "task": map[string]any{}})
	answer("Erin")
	res, rpcErr = response(<-asTask)
	var created struct {
		Task task `json:"task"`
	}
	if decode(t, res, &created); rpcErr != nil || created.Task.TaskID == "" {
		t.Fatalf("as a task: %s %v", res, rpcErr)
	}
	for c.getTask(created.Task.TaskID).Status == "working" {
	}
	var done payload
	decode(t, c.call("tasks/result", map[string]any{"taskId": created.Task.TaskID}), &done)
	if done.IsError || string(done.StructuredContent) != `{"hello":"Erin"}` {
		t.Errorf("the task's result: %+v", done)
	}

	mute := dialRaw(t, s) // no elicitation capability
	for _, params := range []map[string]any{
		{"name": "greet_name", "arguments": map[string]any{}},
		{"name": "greet_name", "arguments": map[string]any{}, "task": map[string]any{}},
	} {
		var p payload
		decode(t, mute.call("tools/call", params), &p)
		if want := `bgmcp: tool greet_name: input request "name": client does not support elicitation`; !p.IsError || len(p.Content) != 1 || p.Content[0].Text != want {
			t.Errorf("%v: %+v, want the tool error %q", params, p, want)
		}
	}
	var list struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	decode(t, mute.call("tasks/list", map[string]any{}), &list)
	if len(list.Tasks) != 0 {
		t.Errorf("%d tasks of the client that could not answer, want none", len(list.Tasks))
	}
}

// stripMeta is a result's JSON without its _meta.
func stripMeta(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var fields map[string]json.RawMessage
	decode(t, raw, &fields)
	delete(fields, "_meta")
	return string(mustJSON(t, fields))
}

// countTasks counts the caller's tasks (list_tasks in the foreground).
func countTasks(t *testing.T, c *modernClient) int {
	t.Helper()
	var p payload
	decode(t, c.result("tools/call", map[string]any{"name": "list_tasks", "arguments": map[string]any{}}), &p)
	var list struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(p.Content[0].Text), &list); err != nil {
		t.Fatalf("list_tasks: %v: %s", err, p.Content[0].Text)
	}
	return len(list.Tasks)
}
