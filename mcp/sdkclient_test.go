package bgmcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// dialSDK connects the Go SDK's client to s over an in-memory transport.
func dialSDK(t *testing.T, s *bgmcp.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-ran
	})
	return cs
}

func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("content: %d items, want 1", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", r.Content[0])
	}
	return tc.Text
}

func TestListTools(t *testing.T) {
	s := newServer(t, newManager(t), newTestTools())
	cs := dialSDK(t, s, nil)
	if got := cs.InitializeResult().ProtocolVersion; got != bgmcp.ProtocolVersion {
		t.Errorf("protocol version %q, want %q", got, bgmcp.ProtocolVersion)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"cancel_task", "echo", "fails", "get_task", "list_tasks", "must_task", "send_message", "slow", "wait_task"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	// The raw view: the tasks capability and each tool's taskSupport.
	c := dialRaw(t, s)
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	decode(t, c.init, &init)
	if got, want := string(init.Capabilities["tasks"]), `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`; got != want {
		t.Errorf("tasks capability %s, want %s", got, want)
	}
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	decode(t, c.call("tools/list", map[string]any{}), &list)
	support := map[string]string{}
	for _, tool := range list.Tools {
		support[tool.Name] = tool.Execution.TaskSupport
	}
	wantSupport := map[string]string{
		"cancel_task": "forbidden", "get_task": "forbidden", "list_tasks": "forbidden", "send_message": "forbidden", "wait_task": "forbidden",
		"echo": "optional", "fails": "optional", "slow": "optional", "must_task": "required",
	}
	for name, want := range wantSupport {
		if support[name] != want {
			t.Errorf("%s: taskSupport %q, want %q", name, support[name], want)
		}
	}
}

func TestPlainToolCall(t *testing.T) {
	cs := dialSDK(t, newServer(t, newManager(t), newTestTools()), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || textOf(t, res) != `{"echo":"hi"}` {
		t.Errorf("echo: isError %v, text %q", res.IsError, textOf(t, res))
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || textOf(t, res) != `{"tasks":[],"total":0}` {
		t.Errorf("list_tasks: isError %v, text %q", res.IsError, textOf(t, res))
	}
}

func TestBadArguments(t *testing.T) {
	cs := dialSDK(t, newServer(t, newManager(t), newTestTools()), nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"echo", map[string]any{}, `echo: argument "text" (a string) is required`},
		{"fails", map[string]any{"text": "x"}, "fails: no luck"},
		{"get_task", map[string]any{}, `invalid arguments: missing "task_id"`},
		{"get_task", map[string]any{"task_id": "nope"}, "task not found: nope"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: protocol error %v, want a tool error", tc.tool, err)
		}
		if !res.IsError || textOf(t, res) != tc.want {
			t.Errorf("%s: isError %v, text %q, want %q", tc.tool, res.IsError, textOf(t, res), tc.want)
		}
	}
}

func TestProgressForeground(t *testing.T) {
	tools := newTestTools()
	close(tools.release)
	got := make(chan string, 10)
	cs := dialSDK(t, newServer(t, newManager(t), tools), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			got <- r.Params.Message // the client calls it for one notification at a time, in order
		},
	})
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"text": "p"}}
	params.SetProgressToken("tok")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	if got, want := []string{<-got, <-got, <-got}, []string{"step 1", "step 2", "step 3"}; !slices.Equal(got, want) {
		t.Errorf("progress %v, want %v", got, want)
	}
}
