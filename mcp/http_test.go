package bgmcp_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// Over streamable HTTP: the SDK's client lists and calls tools, a raw
// client on the SDK's streamable client connection runs a task, and a
// second session cannot see it.
func TestStreamableHTTP(t *testing.T) {
	tools := newTestTools()
	srv := httptest.NewServer(newServer(t, newManager(t), tools).Handler())
	t.Cleanup(srv.Close) // after the clients' clean-ups: they end their sessions
	ctx := context.Background()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != bgmcp.ProtocolVersion {
		t.Errorf("protocol version %q, want %q (the SDK's client picks the newest)", got, bgmcp.ProtocolVersion)
	}
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Tools) != 9 {
		t.Errorf("%d tools, want 9", len(tl.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over http"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || textOf(t, res) != `{"echo":"over http"}` {
		t.Errorf("echo: %v %q", res.IsError, textOf(t, res))
	}

	// Progress of a foreground call arrives on the call's stream.
	steps := make(chan string, 10)
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			steps <- r.Params.Message
		},
	}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	tools.steps = 2
	close(tools.release)
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"text": "fg"}}
	params.SetProgressToken(7)
	if res, err = cs2.CallTool(ctx, params); err != nil || textOf(t, res) != `{"done":"fg"}` {
		t.Fatalf("slow in the foreground: %v %v", res, err)
	}
	<-tools.started
	if got, want := []string{<-steps, <-steps}, []string{"step 1", "step 2"}; !slices.Equal(got, want) {
		t.Errorf("progress %v, want %v", got, want)
	}

	// Tasks, with a raw client on the SDK's streamable client connection.
	a, b := dialHTTP(t, srv.URL), dialHTTP(t, srv.URL)
	tk := a.callTask("slow", map[string]any{"text": "h"}, nil)
	<-tools.started
	if _, err := b.try("tasks/get", map[string]any{"taskId": tk.TaskID}); err == nil || err.Code != -32602 || err.Message != "Task not found: "+tk.TaskID {
		t.Errorf("another HTTP session: %v", err)
	}
	var p payload
	decode(t, a.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if p.IsError || p.Content[0].Text != `{"done":"h"}` || p.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
		t.Errorf("result %+v", p)
	}
	if got := a.getTask(tk.TaskID); got.Status != "completed" {
		t.Errorf("task %+v", got)
	}
}

func dialHTTP(t *testing.T, url string) *rawClient {
	t.Helper()
	return dialHTTPCaps(t, url, map[string]any{})
}

// dialHTTPCaps is dialHTTP for a client that declares caps in initialize.
func dialHTTPCaps(t *testing.T, url string, caps map[string]any) *rawClient {
	t.Helper()
	conn, err := (&mcp.StreamableClientTransport{Endpoint: url}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return newRawCaps(t, conn, caps)
}
