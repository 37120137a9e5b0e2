package bgmcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

func TestAddToolErrors(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	run := func(context.Context, *bgmcp.Call) (any, error) { return nil, nil }
	if err := s.AddTool(bgmcp.Tool{Name: "ok", InputSchema: echoSchema, Run: run}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool bgmcp.Tool
		want string
	}{
		{bgmcp.Tool{InputSchema: echoSchema, Run: run}, "bgmcp: AddTool: empty tool name"},
		{bgmcp.Tool{Name: "x", InputSchema: echoSchema}, `bgmcp: AddTool "x": nil Run`},
		{bgmcp.Tool{Name: "x", InputSchema: echoSchema, Run: run, TaskSupport: "maybe"}, `bgmcp: AddTool "x": unknown TaskSupport "maybe"`},
		{bgmcp.Tool{Name: "x", InputSchema: json.RawMessage(`{"type":"string"}`), Run: run}, `bgmcp: AddTool "x": InputSchema must be a JSON object of type "object"`},
		{bgmcp.Tool{Name: "x", Run: run}, `bgmcp: AddTool "x": InputSchema must be a JSON object of type "object"`},
		{bgmcp.Tool{Name: "get_task", InputSchema: echoSchema, Run: run}, `bgmcp: AddTool "get_task": name taken by a task tool`},
		{bgmcp.Tool{Name: "ok", InputSchema: echoSchema, Run: run}, `bgmcp: AddTool "ok": name already added`},
	} {
		if err := s.AddTool(tc.tool); err == nil || err.Error() != tc.want {
			t.Errorf("AddTool(%q): %v, want %q", tc.tool.Name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		opt  bgmcp.Option
		want string
	}{
		{bgmcp.WithOwnerFunc(nil), "bgmcp: WithOwnerFunc: nil function"},
		{bgmcp.WithImplementation(nil), "bgmcp: WithImplementation: nil implementation"},
		{bgmcp.WithSessionTimeout(0), "bgmcp: WithSessionTimeout: 0s is not positive"},
		{bgmcp.WithSessionTimeout(-time.Second), "bgmcp: WithSessionTimeout: -1s is not positive"},
		{bgmcp.WithMaxSessions(0), "bgmcp: WithMaxSessions: 0 is not positive"},
		{bgmcp.WithMaxBodyBytes(-1), "bgmcp: WithMaxBodyBytes: -1 is not positive"},
	} {
		if _, err := bgmcp.NewServer(newManager(t), tc.opt); err == nil || err.Error() != tc.want {
			t.Errorf("NewServer: %v, want %q", err, tc.want)
		}
	}
	if _, err := bgmcp.NewServer(nil); err == nil || err.Error() != "bgmcp: NewServer: nil Manager" {
		t.Errorf("NewServer(nil): %v", err)
	}
}

// A panic in a foreground call is a tool error; in a task, the task's
// failure.
func TestToolPanics(t *testing.T) {
	s := newServer(t, newManager(t), nil)
	if err := s.AddTool(bgmcp.Tool{Name: "boom", InputSchema: echoSchema, Run: func(context.Context, *bgmcp.Call) (any, error) { panic("kaboom") }}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, s)
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	decode(t, c.call("tools/call", map[string]any{"name": "boom", "arguments": map[string]any{}}), &res)
	if !res.IsError || res.Content[0].Text != "bgmcp: tool boom panicked: kaboom" {
		t.Errorf("foreground panic: %+v", res)
	}
	tk := c.callTask("boom", map[string]any{}, nil)
	c.call("tasks/result", map[string]any{"taskId": tk.TaskID})
	if got := c.getTask(tk.TaskID); got.Status != "failed" || got.StatusMessage != "panic: kaboom" {
		t.Errorf("task panic: %+v", got)
	}
}
