package bgmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
)

// bigText is 200 KiB of text, with characters JSON escapes.
var bigText = strings.Repeat("line <7> \"q\" é\n", 200<<10/16)

// bigTools are tools whose result is about 200 KiB: "big" a JSON object
// (text and structured content), "big_error" a tool result with isError.
func bigTools() []bgmcp.Tool {
	return []bgmcp.Tool{
		{
			Name: "big", Description: "A large result.", InputSchema: echoSchema,
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				var args struct{ Text string }
				_ = json.Unmarshal(call.Arguments, &args)
				return map[string]string{"label": args.Text, "data": bigText}, nil
			},
		},
		{
			Name: "big_error", Description: "A large error result.", InputSchema: echoSchema,
			Run: func(context.Context, *bgmcp.Call) (any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: bigText}}, IsError: true}, nil
			},
		},
	}
}

func newBigServer(t *testing.T, m *bgtask.Manager, opts ...bgmcp.Option) *bgmcp.Server {
	t.Helper()
	s := newServer(t, m, nil, opts...)
	for _, tool := range bigTools() {
		if err := s.AddTool(tool); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// fields decodes a result's top-level fields, each as its raw JSON.
func fields(t *testing.T, b json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	decode(t, b, &f)
	return f
}

// checkWhole checks that a tasks/result is the plain call's result byte for
// byte, plus the related task in _meta.
func checkWhole(t *testing.T, got, plain json.RawMessage, id string) {
	t.Helper()
	g, p := fields(t, got), fields(t, plain)
	if _, ok := p["_meta"]; ok {
		t.Errorf("the plain result has _meta %s", p["_meta"])
	}
	if want := `{"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"}}`; string(g["_meta"]) != want {
		t.Errorf("tasks/result _meta %s, want %s", g["_meta"], want)
	}
	delete(g, "_meta")
	if len(g) != len(p) {
		t.Errorf("tasks/result has fields %v, the plain call %v", keys(g), keys(p))
	}
	for k, v := range p {
		if !bytes.Equal(g[k], v) {
			t.Errorf("tasks/result %s: %d bytes, differs from the plain call's %d bytes (%.80s… vs %.80s…)", k, len(g[k]), len(v), g[k], v)
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// cutView is a cut copy of a result, as tasks/result returns it.
type cutView struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              map[string]json.RawMessage
}

// checkCut checks that a tasks/result is the visible cut copy of the plain
// call's result: one text block, the start of its text then the marker
// naming the whole result's size, the same isError, _meta saying so, and
// no more than the record cap.
func checkCut(t *testing.T, got, plain json.RawMessage, id string) {
	t.Helper()
	var whole, cut cutView
	decode(t, plain, &whole)
	var raw struct {
		cutView
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	decode(t, got, &raw)
	cut, cut.Meta = raw.cutView, raw.Meta
	n := len(plain)
	marker := fmt.Sprintf("…[truncated: %d bytes total]", n)
	if len(cut.Content) != 1 || cut.Content[0].Type != "text" || !strings.HasSuffix(cut.Content[0].Text, marker) {
		t.Fatalf("cut copy content %.200v, want one text block ending %q", cut.Content, marker)
	}
	text := strings.TrimSuffix(cut.Content[0].Text, marker)
	if !strings.HasPrefix(whole.Content[0].Text, text) || len(text) < 20<<10 {
		t.Errorf("cut copy text: %d bytes, not a start of the whole text (or too short)", len(text))
	}
	if cut.IsError != whole.IsError || cut.StructuredContent != nil {
		t.Errorf("cut copy isError %v structuredContent %s, want isError %v and none", cut.IsError, cut.StructuredContent, whole.IsError)
	}
	wantMeta := map[string]string{
		"io.modelcontextprotocol/related-task": `{"taskId":"` + id + `"}`,
		"io.github.bgtask/truncated":           fmt.Sprintf(`{"originalBytes":%d}`, n),
	}
	if len(cut.Meta) != len(wantMeta) {
		t.Errorf("cut copy _meta %v, want %v", cut.Meta, wantMeta)
	}
	for k, v := range wantMeta {
		if string(cut.Meta[k]) != v {
			t.Errorf("cut copy _meta[%s] = %s, want %s", k, cut.Meta[k], v)
		}
	}
	if len(got) > 64<<10+200 { // the Manager's default Caps.MaxResultBytes
		t.Errorf("cut copy of %d bytes, over the record cap", len(got))
	}
}

// A result over the record cap is returned whole by tasks/result while the
// Server keeps it, byte for byte as the plain call returns it; when it is
// not kept (no memory, a result larger than the memory, or pushed out by
// newer ones, oldest first) tasks/result returns a cut copy that says so.
// The task's status is completed, or failed for a result with isError.
func TestTaskResultLarge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []bgmcp.Option
		tool   string
		status string
		calls  int  // task-mode calls, one after the other
		whole  bool // tasks/result right after each call's end is whole
	}{
		{"kept", nil, "big", "completed", 1, true},
		{"kept error", nil, "big_error", "failed", 1, true},
		{"no memory", []bgmcp.Option{bgmcp.WithResultMemory(0)}, "big", "completed", 1, false},
		{"no memory error", []bgmcp.Option{bgmcp.WithResultMemory(0)}, "big_error", "failed", 1, false},
		{"larger than the memory", []bgmcp.Option{bgmcp.WithResultMemory(100 << 10)}, "big", "completed", 1, false},
		{"oldest dropped", []bgmcp.Option{bgmcp.WithResultMemory(2 << 20)}, "big", "completed", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, newBigServer(t, newManager(t), tc.opts...))
			args := map[string]any{"text": "x"}
			plain := c.call("tools/call", map[string]any{"name": tc.tool, "arguments": args})
			if len(plain) < 200<<10 {
				t.Fatalf("plain result of %d bytes", len(plain))
			}
			// One call at a time: each ends before the next one starts, so
			// their results are kept in that order.
			var ids []string
			for i := range tc.calls {
				id := c.callTask(tc.tool, args, nil).TaskID
				ids = append(ids, id)
				res := c.call("tasks/result", map[string]any{"taskId": id})
				if got := c.getTask(id); got.Status != tc.status {
					t.Errorf("task %d: tasks/get status %q, want %q", i, got.Status, tc.status)
				}
				if tc.whole {
					checkWhole(t, res, plain, id)
				} else {
					checkCut(t, res, plain, id)
				}
			}
			if tc.calls == 3 {
				// The memory holds two results: the first call's was dropped.
				checkCut(t, c.call("tasks/result", map[string]any{"taskId": ids[0]}), plain, ids[0])
				checkWhole(t, c.call("tasks/result", map[string]any{"taskId": ids[1]}), plain, ids[1])
				checkWhole(t, c.call("tasks/result", map[string]any{"taskId": ids[2]}), plain, ids[2])
			}
		})
	}
}

// After a restart only the record's cut copy is left: tasks/result returns
// it, saying so.
func TestTaskResultLargeAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	st := openSQLite(t, path)
	old, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance("old-process"))
	if err != nil {
		t.Fatal(err)
	}
	c1 := dialRaw(t, newBigServer(t, old, bgmcp.WithOwnerFunc(alice)))
	args := map[string]any{"text": "x"}
	plain := c1.call("tools/call", map[string]any{"name": "big", "arguments": args})
	id := c1.callTask("big", args, nil).TaskID
	checkWhole(t, c1.call("tasks/result", map[string]any{"taskId": id}), plain, id)
	if err := old.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	m := newManager(t, bgtask.WithStore(openSQLite(t, path)), bgtask.WithInstance("new-process"))
	c2 := dialRaw(t, newBigServer(t, m, bgmcp.WithOwnerFunc(alice)))
	if got := c2.getTask(id); got.Status != "completed" {
		t.Errorf("after the restart: status %q, want completed", got.Status)
	}
	checkCut(t, c2.call("tasks/result", map[string]any{"taskId": id}), plain, id)
}

func TestResultOptionsErrors(t *testing.T) {
	m := newManager(t)
	for _, tc := range []struct {
		opt  bgmcp.Option
		want string
	}{
		{bgmcp.WithResultMemory(-1), "bgmcp: WithResultMemory: negative size -1"},
		{bgmcp.WithRetainFor(0), "bgmcp: WithRetainFor: the retention must be positive, got 0s"},
		{bgmcp.WithRetainFor(-1), "bgmcp: WithRetainFor: the retention must be positive, got -1ns"},
	} {
		if _, err := bgmcp.NewServer(m, tc.opt); err == nil || err.Error() != tc.want {
			t.Errorf("NewServer: %v, want %q", err, tc.want)
		}
	}
}

// Over streamable HTTP too: a 200 KiB result is whole through tasks/result,
// and a task's question reaches a client that waits in tasks/result and
// declared elicitation.
func TestTaskResultAndElicitationHTTP(t *testing.T) {
	a := newAskTool(false)
	s := newBigServer(t, newManager(t))
	if err := s.AddTool(a.tool()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c := dialHTTPCaps(t, srv.URL, map[string]any{"elicitation": map[string]any{}})

	args := map[string]any{"text": "x"}
	plain := c.call("tools/call", map[string]any{"name": "big", "arguments": args})
	id := c.callTask("big", args, nil).TaskID
	checkWhole(t, c.call("tasks/result", map[string]any{"taskId": id}), plain, id)

	tk := c.callTask("ask", map[string]any{"text": "x"}, nil)
	pending := c.send("tasks/result", map[string]any{"taskId": tk.TaskID})
	req := <-c.calls
	var params struct {
		Message string `json:"message"`
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	decode(t, req.Params, &params)
	if req.Method != "elicitation/create" || params.Message != "which branch?" || params.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
		t.Fatalf("request %s %s, want the task's question", req.Method, req.Params)
	}
	c.reply(req, map[string]any{"action": "accept", "content": map[string]any{"answer": "main"}}, nil)
	res, rerr := response(<-pending)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var p payload
	decode(t, res, &p)
	if p.IsError || string(p.StructuredContent) != `{"branch":"main"}` {
		t.Errorf("tasks/result %s, want the answer", res)
	}
}
