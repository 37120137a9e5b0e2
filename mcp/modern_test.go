package bgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// modernServer serves s over HTTP behind bearerAuth (alice and bob) when
// authed, else with no authentication; it returns a client for token.
func modernServer(t *testing.T, s *bgmcp.Server, authed bool) string {
	t.Helper()
	var h http.Handler = s.Handler()
	if authed {
		h = bearerAuth(map[string]string{"a": "alice", "b": "bob"}, h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// server/discover names both revisions and the tasks extension; the
// initialize of 2025-11-25 on the same endpoint still gets its tasks
// capability, with no extension.
func TestModernDiscover(t *testing.T) {
	url := modernServer(t, newServer(t, newManager(t), newTestTools()), false)
	c := &modernClient{t: t, url: url}
	var d struct {
		ResultType        string   `json:"resultType"`
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
			Tools      json.RawMessage            `json:"tools"`
		} `json:"capabilities"`
	}
	decode(t, c.result("server/discover", nil), &d)
	if d.ResultType != "complete" || !slices.Contains(d.SupportedVersions, "2026-07-28") || !slices.Contains(d.SupportedVersions, "2025-11-25") {
		t.Errorf("discover: %+v, want both revisions", d)
	}
	if ext, ok := d.Capabilities.Extensions[bgmcp.TasksExtension]; !ok || string(ext) != "{}" || d.Capabilities.Tools == nil {
		t.Errorf("discover capabilities: %+v, want tools and the tasks extension {}", d.Capabilities)
	}

	legacy := &httpClient{t: t, url: url}
	t.Cleanup(func() { legacy.do(http.MethodDelete, nil) })
	var init struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	decode(t, legacy.result("initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "0"},
	}), &init)
	if init.ProtocolVersion != "2025-11-25" || string(init.Capabilities["tasks"]) != `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}` {
		t.Errorf("initialize: %+v", init)
	}
	if _, ok := init.Capabilities["extensions"]; ok {
		t.Errorf("initialize advertises extensions: %s", init.Capabilities["extensions"])
	}
}

// A request that declared the extension gets a task handle for a host tool
// that may run as a task, polls it working (with its poll interval and a
// null ttl), and reads its result once it completed (with its ttl); the
// bgtask tools still answer in the foreground.
func TestModernTaskLifecycle(t *testing.T) {
	tools := newTestTools()
	c := &modernClient{t: t, url: modernServer(t, newServer(t, newManager(t), tools, bgmcp.WithOwnerFunc(userOwner)), true), token: "a", tasks: true}

	tk := c.start("slow", map[string]any{"text": "modern"})
	if tk.PollIntervalMs != 1000 || tk.TTLMs != nil || tk.LastUpdatedAt != tk.CreatedAt || strings.HasPrefix(tk.TaskID, "anon.") {
		t.Errorf("handle %+v", tk)
	}
	if got := <-tools.started; got != "modern" {
		t.Fatalf("the task started with %q", got)
	}
	got := c.get(tk.TaskID)
	if got.ResultType != "complete" || got.Status != "working" || got.PollIntervalMs != 1000 || got.TTLMs != nil || got.Result != nil || got.Error != nil {
		t.Errorf("working: %+v", got)
	}
	close(tools.release)
	got = c.until(tk.TaskID, "working")
	if got.Status != "completed" || got.Result == nil || string(got.Result.StructuredContent) != `{"done":"modern"}` || got.Result.IsError {
		t.Fatalf("completed: %+v", got)
	}
	if got.TTLMs == nil || *got.TTLMs < 24*3600*1000 || got.PollIntervalMs != 0 || got.CreatedAt != tk.CreatedAt {
		t.Errorf("completed: ttl %v, poll %d, created %s", got.TTLMs, got.PollIntervalMs, got.CreatedAt)
	}
	// The inlined result is a 2026-07-28 CallToolResult: it says it is complete.
	var raw struct {
		Result struct {
			ResultType string `json:"resultType"`
		} `json:"result"`
	}
	if decode(t, c.result("tasks/get", map[string]any{"taskId": tk.TaskID}), &raw); raw.Result.ResultType != "complete" {
		t.Errorf("the inlined result's resultType is %q, want complete", raw.Result.ResultType)
	}

	var fg payload
	decode(t, c.result("tools/call", map[string]any{"name": "list_tasks", "arguments": map[string]any{}}), &fg)
	if fg.IsError || !strings.Contains(fg.Content[0].Text, `"task_id":"`+tk.TaskID+`"`) {
		t.Errorf("list_tasks in the foreground: %+v", fg)
	}
}

// A tool's failure is what the plain call answers, a completed task with a
// result with isError (not a failed task: that is for protocol errors).
func TestModernTaskFails(t *testing.T) {
	c := &modernClient{t: t, url: modernServer(t, newServer(t, newManager(t), newTestTools()), false), tasks: true}
	tk := c.start("fails", map[string]any{"text": "x"})
	got := c.until(tk.TaskID, "working")
	if got.Status != "completed" || got.Result == nil || !got.Result.IsError || got.Result.Content[0].Text != "fails: no luck" || got.Error != nil {
		t.Errorf("%+v, want completed with isError", got)
	}
}

// Without the extension declared: a tool that may run as a task runs in the
// foreground, one that requires a task is refused with -32021, and so are
// the task methods; tasks/list and tasks/result are not methods of the
// revision (-32601), nor is tasks/update of 2025-11-25.
func TestModernUndeclared(t *testing.T) {
	s := newServer(t, newManager(t), newTestTools())
	url := modernServer(t, s, false)
	plain := &modernClient{t: t, url: url}
	var res struct {
		ResultType string `json:"resultType"`
		payload
	}
	decode(t, plain.result("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "fg"}}), &res)
	if res.ResultType != "complete" || string(res.StructuredContent) != `{"echo":"fg"}` {
		t.Errorf("echo without the extension: %+v", res)
	}
	const wantData = `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, tc := range []struct {
		method string
		params map[string]any
	}{
		{"tools/call", map[string]any{"name": "must_task", "arguments": map[string]any{"text": "x"}}},
		{"tasks/get", map[string]any{"taskId": "task_x"}},
		{"tasks/cancel", map[string]any{"taskId": "task_x"}},
		{"tasks/update", map[string]any{"taskId": "task_x", "inputResponses": map[string]any{}}},
	} {
		e := plain.fail(tc.method, tc.params)
		if e.Code != -32021 || e.Message != "Missing required client capability: io.modelcontextprotocol/tasks" || string(e.Data) != wantData {
			t.Errorf("%s without the extension: %+v", tc.method, e)
		}
	}

	declared := &modernClient{t: t, url: url, tasks: true}
	for _, method := range []string{"tasks/list", "tasks/result"} {
		e := declared.fail(method, map[string]any{"taskId": "task_x"})
		if e.Code != -32601 || e.Message != `method not found: "`+method+`"` { // the SDK's text for -32601
			t.Errorf("%s: %+v", method, e)
		}
	}
	_, e := dialRaw(t, s).try("tasks/update", map[string]any{"taskId": "task_x", "inputResponses": map[string]any{}})
	if e == nil || e.Code != -32601 || e.Message != `method not found: "tasks/update"` {
		t.Errorf("tasks/update on 2025-11-25: %+v", e)
	}
}

// A task's question is an input request of tasks/get, answered once with
// tasks/update: the first accepted answer reaches the task, a second one to
// the same key is acknowledged and ignored.
func TestModernInput(t *testing.T) {
	m := newManager(t)
	s := newServer(t, m, nil)
	ask := newAskTool(true)
	if err := s.AddTool(ask.tool()); err != nil {
		t.Fatal(err)
	}
	c := &modernClient{t: t, url: modernServer(t, s, false), tasks: true}
	tk := c.start("ask", map[string]any{"text": "x"})
	close(ask.ask)
	got := c.until(tk.TaskID, "working")
	if got.Status != "input_required" || got.StatusMessage != "which branch?" || len(got.InputRequests) != 1 {
		t.Fatalf("asking: %+v", got)
	}
	var key string
	for k, r := range got.InputRequests {
		key = k
		if r.Method != "elicitation/create" || r.Params.Mode != "form" || r.Params.Message != "which branch?" || string(r.Params.RequestedSchema) != wantSchema {
			t.Errorf("input request %s: %+v", k, r)
		}
	}
	if again := c.get(tk.TaskID); len(again.InputRequests) != 1 || again.InputRequests[key].Params.Message != "which branch?" {
		t.Errorf("a second poll: %+v, want the same request", again)
	}

	bad := c.fail("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{key: map[string]any{"action": "maybe"}}})
	if bad.Code != -32602 || bad.Message != fmt.Sprintf("input response %q: unknown action \"maybe\" (want accept, decline or cancel)", key) {
		t.Errorf("a bad action: %+v", bad)
	}
	var ack map[string]any
	for _, answer := range []string{"main", "second"} {
		decode(t, c.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{
			key:              map[string]any{"action": "accept", "content": map[string]any{"answer": answer}},
			"input_unknown":  map[string]any{"action": "decline"},
			"not-a-response": map[string]any{"ignored": true}, // not outstanding: whatever it holds
		}}), &ack)
		if len(ack) != 2 || ack["resultType"] != "complete" { // and _meta's serverInfo
			t.Errorf("update: %v, want an empty acknowledgement", ack)
		}
	}
	close(ask.finish)
	got = c.until(tk.TaskID, "working", "input_required")
	if got.Status != "completed" || string(got.Result.StructuredContent) != `{"branch":"main"}` {
		t.Errorf("after the answers: %+v, want the first answer", got)
	}
}

// A declined input request cancels the task with a reason that says so.
func TestModernInputDeclined(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	ask := newAskTool(false)
	if err := s.AddTool(ask.tool()); err != nil {
		t.Fatal(err)
	}
	c := &modernClient{t: t, url: modernServer(t, s, false), tasks: true}
	tk := c.start("ask", map[string]any{"text": "x"})
	got := c.until(tk.TaskID, "working")
	var key string
	for k := range got.InputRequests {
		key = k
	}
	c.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{key: map[string]any{"action": "decline"}}})
	got = c.until(tk.TaskID, "input_required", "working")
	if got.Status != "cancelled" || got.StatusMessage != "bgtask: task cancelled: bgmcp: the client declined the task's input request" {
		t.Errorf("%+v, want cancelled with the reason", got)
	}
}

// tasks/cancel acknowledges at once; the task's ctx ends and it reads
// cancelled. Cancelling it again, once ended, is acknowledged too.
func TestModernCancel(t *testing.T) {
	tools := newTestTools()
	c := &modernClient{t: t, url: modernServer(t, newServer(t, newManager(t), tools), false), tasks: true}
	tk := c.start("slow", map[string]any{"text": "x"})
	<-tools.started
	for range 2 {
		var ack map[string]any
		decode(t, c.result("tasks/cancel", map[string]any{"taskId": tk.TaskID}), &ack)
		if ack["resultType"] != "complete" {
			t.Errorf("cancel: %v", ack)
		}
		if err := <-tools.ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("the task's ctx ended with %v", err)
		}
		got := c.until(tk.TaskID, "working")
		if got.Status != "cancelled" || got.StatusMessage != "bgtask: task cancelled" || got.Result != nil {
			t.Errorf("after cancel: %+v", got)
		}
		tools.ended <- context.Canceled // the second round finds it ended
	}
}

// Owners: a named caller's handle is useless to another caller, with the
// text of an unknown id; an anonymous caller's handle is its only
// credential (a made-up one, or the bare task id, is not found).
func TestModernOwners(t *testing.T) {
	tools := newTestTools()
	url := modernServer(t, newServer(t, newManager(t), tools, bgmcp.WithOwnerFunc(userOwner)), true)
	alice := &modernClient{t: t, url: url, token: "a", tasks: true}
	bob := &modernClient{t: t, url: url, token: "b", tasks: true}
	tk := alice.start("slow", map[string]any{"text": "x"})
	<-tools.started
	for _, tc := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/get", map[string]any{"taskId": tk.TaskID}},
		{"tasks/cancel", map[string]any{"taskId": tk.TaskID}},
		{"tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{}}},
	} {
		if e := bob.fail(tc.method, tc.params); e.Code != -32602 || e.Message != "Task not found: "+tk.TaskID {
			t.Errorf("bob's %s: %+v", tc.method, e)
		}
	}
	if got := alice.get(tk.TaskID); got.Status != "working" {
		t.Errorf("alice's task after bob: %+v", got)
	}
	close(tools.release)

	anon := &modernClient{t: t, url: modernServer(t, newServer(t, newManager(t), newTestTools()), false), tasks: true}
	atk := anon.start("echo", map[string]any{"text": "a"})
	owner, id, ok := strings.Cut(strings.TrimPrefix(atk.TaskID, "anon."), ".")
	if !strings.HasPrefix(atk.TaskID, "anon.") || !ok || len(owner) != 26 || !strings.HasPrefix(id, "task_") {
		t.Fatalf("anonymous handle %q", atk.TaskID)
	}
	if got := anon.until(atk.TaskID, "working"); got.Status != "completed" || string(got.Result.StructuredContent) != `{"echo":"a"}` {
		t.Errorf("anonymous task: %+v", got)
	}
	for _, h := range []string{id, "anon.AAAAAAAAAAAAAAAAAAAAAAAAAA." + id, "anon." + owner, "anon..", "anon." + owner + ".task_0"} {
		if e := anon.fail("tasks/get", map[string]any{"taskId": h}); e.Code != -32602 || e.Message != "Task not found: "+h {
			t.Errorf("tasks/get %q: %+v", h, e)
		}
	}
}

// Bad input is answered, and the server goes on.
func TestModernBadInput(t *testing.T) {
	s := newServer(t, newManager(t), newTestTools(), bgmcp.WithMaxBodyBytes(4096))
	url := modernServer(t, s, false)
	c := &modernClient{t: t, url: url, tasks: true}
	tk := c.start("echo", map[string]any{"text": "x"})
	for _, tc := range []struct {
		name, method string
		params       map[string]any
		code         int
		message      string
	}{
		{"get without taskId", "tasks/get", map[string]any{}, -32602, "missing taskId"},
		{"get of an unknown task", "tasks/get", map[string]any{"taskId": "task_nope"}, -32602, "Task not found: task_nope"},
		{"cancel without taskId", "tasks/cancel", map[string]any{}, -32602, "missing taskId"},
		{"update without taskId", "tasks/update", map[string]any{"inputResponses": map[string]any{}}, -32602, "missing taskId"},
		{"update without responses", "tasks/update", map[string]any{"taskId": tk.TaskID}, -32602, "missing inputResponses"},
		{"update of an unknown task", "tasks/update", map[string]any{"taskId": "task_nope", "inputResponses": map[string]any{}}, -32602, "Task not found: task_nope"},
		{"call of an unknown tool", "tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}}, -32602, `unknown tool "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &modernClient{t: t, url: url, tasks: true}
			e := c.fail(tc.method, tc.params)
			if e.Code != tc.code || e.Message != tc.message {
				t.Errorf("%+v, want %d %q", e, tc.code, tc.message)
			}
		})
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, tc := range []struct {
		name, body, version string
		status              int
		want                string
		mcpName             string // the Mcp-Name header, if any
	}{
		{"Mcp-Name not the taskId", `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"` + tk.TaskID + `",` + meta + `}}`, "2026-07-28", 400,
			`{"error":{"code":-32020,"message":"Mcp-Name header \"task_other\" does not match params.taskId"},"id":9,"jsonrpc":"2.0"}`, "task_other"},
		{"Mcp-Name the taskId", `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"` + tk.TaskID + `",` + meta + `}}`, "2026-07-28", 200, `"taskId":"` + tk.TaskID + `"`, tk.TaskID},
		{"taskId not a string", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"0"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, "2026-07-28", 400, `"code":-32602`, ""},
		{"body over the cap", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + strings.Repeat("x", 5000) + `"}}`, "2026-07-28", 413, "bgmcp: request body longer than 4096 bytes", ""},
		{"per-request version without the header", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "", 400, `"code":-32020`, ""},
		{"not JSON", `{"jsonrpc":`, "2026-07-28", 400, "malformed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Mcp-Method": {"tasks/get"}}
			if tc.mcpName != "" {
				h.Set("Mcp-Name", tc.mcpName)
			}
			r := c.rawHeader([]byte(tc.body), tc.version, h)
			if r.status != tc.status || !strings.Contains(r.body, tc.want) {
				t.Errorf("%d %s, want %d with %q", r.status, r.body, tc.status, tc.want)
			}
		})
	}
	if got := c.until(tk.TaskID, "working"); got.Status != "completed" {
		t.Errorf("after the bad input: %+v", got)
	}
}

// The Go SDK's client picks 2026-07-28 over streamable HTTP and calls tools
// in the foreground (it does not declare the extension).
func TestModernSDKClient(t *testing.T) {
	url := modernServer(t, newServer(t, newManager(t), newTestTools()), false)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sdk", Version: "0"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Errorf("negotiated %q", got)
	}
	if _, ok := cs.InitializeResult().Capabilities.Extensions[bgmcp.TasksExtension]; !ok {
		t.Errorf("capabilities %+v, want the tasks extension", cs.InitializeResult().Capabilities)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "sdk"}})
	if err != nil || res.IsError || textOf(t, res) != `{"echo":"sdk"}` {
		t.Fatalf("echo: %+v %v", res, err)
	}
}

// A tool that returns a *jsonrpc.Error fails at the protocol level: the
// plain call answers with that error, a task ends failed with it inlined
// (and no result).
func TestModernProtocolError(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	err := s.AddTool(bgmcp.Tool{Name: "rpcfail", Description: "Fails upstream.", InputSchema: echoSchema,
		Run: func(context.Context, *bgmcp.Call) (any, error) {
			return nil, fmt.Errorf("calling upstream: %w", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "upstream down"})
		}})
	if err != nil {
		t.Fatal(err)
	}
	url := modernServer(t, s, false)
	plain := &modernClient{t: t, url: url}
	if e := plain.fail("tools/call", map[string]any{"name": "rpcfail", "arguments": map[string]any{"text": "x"}}); e.Code != -32603 || e.Message != "upstream down" {
		t.Errorf("plain call: %+v", e)
	}
	c := &modernClient{t: t, url: url, tasks: true}
	tk := c.start("rpcfail", map[string]any{"text": "x"})
	got := c.until(tk.TaskID, "working")
	if got.Status != "failed" || got.Error == nil || got.Error.Code != -32603 || got.Error.Message != "upstream down" || got.Result != nil {
		t.Errorf("%+v, want failed with the error", got)
	}
}
