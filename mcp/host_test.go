package bgmcp_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// A host attaches bgmcp to its own SDK server: from one endpoint, in both
// revisions, clients get the host's resources, prompts, completions and
// its own SDK tools beside bgtask's tools and tasks.
func TestHostSDKServer(t *testing.T) {
	host := mcp.NewServer(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"paris"}}}, nil
		},
	})
	host.AddResource(&mcp.Resource{URI: "test://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: "read me"}}}, nil
		})
	host.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	mcp.AddTool(host, &mcp.Tool{Name: "host_ping"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	s := newServer(t, newManager(t), newTestTools(), bgmcp.WithSDKServer(host))
	url := modernServer(t, s, false)

	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(t.Context(),
				&mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult(); got.ProtocolVersion != version || got.ServerInfo.Name != "host" {
				t.Errorf("negotiated %s with %+v", got.ProtocolVersion, got.ServerInfo)
			}
			r, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://readme"})
			if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "read me" {
				t.Errorf("resources/read: %+v %v", r, err)
			}
			p, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet"})
			if err != nil || len(p.Messages) != 1 || p.Messages[0].Content.(*mcp.TextContent).Text != "hello" {
				t.Errorf("prompts/get: %+v %v", p, err)
			}
			c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "city", Value: "pa"}})
			if err != nil || !slices.Equal(c.Completion.Values, []string{"paris"}) {
				t.Errorf("completion/complete: %+v %v", c, err)
			}
			tl, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tl.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"cancel_task", "echo", "fails", "get_task", "host_ping", "list_tasks", "must_task", "send_message", "slow", "wait_task"}; !slices.Equal(names, want) {
				t.Errorf("tools %v, want %v", names, want)
			}
			for _, name := range []string{"host_ping", "echo"} {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}})
				if err != nil || res.IsError {
					t.Errorf("%s: %+v %v", name, res, err)
				}
			}
		})
	}
	c := &modernClient{t: t, url: url, tasks: true}
	tk := c.start("echo", map[string]any{"text": "task"})
	if got := c.until(tk.TaskID, "working"); got.Status != "completed" || string(got.Result.StructuredContent) != `{"echo":"task"}` {
		t.Errorf("a task on the host's server: %+v", got)
	}
}

// With an event store, a 2025-11-25 client resumes a stream: each event
// has an id, and a GET with Last-Event-ID replays what came after it.
func TestEventStoreResumption(t *testing.T) {
	tools := newTestTools()
	close(tools.release)
	s := newServer(t, newManager(t), tools, bgmcp.WithEventStore(mcp.NewMemoryEventStore(nil)))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c := &httpClient{t: t, url: srv.URL, token: "x"}
	c.open()
	t.Cleanup(func() { c.do(http.MethodDelete, nil) })
	r := c.post("tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"text": "x"}, "_meta": map[string]any{"progressToken": 1}})
	var ids []string
	for line := range strings.Lines(r.body) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) != 5 { // the priming event, three progress notifications, the response
		t.Fatalf("event ids %v in %s, want 5", ids, r.body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Authorization", "Bearer x")
	req.Header.Set("Last-Event-ID", ids[2])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var replayed []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && len(replayed) < 2 {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			replayed = append(replayed, id)
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && bytes.Contains([]byte(d), []byte(`"result"`)) && !strings.Contains(d, `{"done":"x"}`) {
			t.Errorf("replayed response %s", d)
		}
	}
	if res.StatusCode != http.StatusOK || !slices.Equal(replayed, ids[3:]) {
		t.Errorf("replay after %s: %d %v, want %v", ids[2], res.StatusCode, replayed, ids[3:])
	}
}
