package bgmcp_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

func alice(context.Context, *mcp.ServerSession) (string, error) { return "alice", nil }

func openSQLite(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A server restarted on the same SQLite database shows the task the old
// process ran as failed, with a message that says why.
func TestRestartSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	tools := newTestTools()

	// The old process: its task is running when it "dies" (it is left
	// running, unseen, until the end of the test; its late end is fenced).
	// Its store is closed, as a dead process's would be: a store whose
	// process lives keeps its records from the new one.
	oldStore := openSQLite(t, path)
	old := newManager(t, bgtask.WithStore(oldStore), bgtask.WithInstance("old-process"))
	t.Cleanup(func() { close(tools.release) }) // before old's Shutdown (clean-ups run last first)
	c1 := dialRaw(t, newServer(t, old, tools, bgmcp.WithOwnerFunc(alice)))
	tk := c1.callTask("slow", map[string]any{"text": "r"}, nil)
	<-tools.started
	if err := oldStore.Close(); err != nil {
		t.Fatal(err)
	}

	// The new process, on the same database.
	m := newManager(t, bgtask.WithStore(openSQLite(t, path)), bgtask.WithInstance("new-process"))
	c2 := dialRaw(t, newServer(t, m, tools, bgmcp.WithOwnerFunc(alice)))
	want := `bgtask: interrupted: the runtime that ran it (instance "old-process") is gone; it will not be re-run`
	got := c2.getTask(tk.TaskID)
	if got.Status != "failed" || got.StatusMessage != want {
		t.Errorf("after restart: %+v, want failed with %q", got, want)
	}
	var p payload
	decode(t, c2.call("tasks/result", map[string]any{"taskId": tk.TaskID}), &p)
	if !p.IsError || p.Content[0].Text != want {
		t.Errorf("result after restart: %+v", p)
	}
}

// The owner comes from the owner function; a blank owner or an error
// refuses every request with a clear error.
func TestNoOwner(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner func(context.Context, *mcp.ServerSession) (string, error)
		want  string
	}{
		{"blank", func(context.Context, *mcp.ServerSession) (string, error) { return " ", nil }, "bgmcp: no owner for this request"},
		{"error", func(context.Context, *mcp.ServerSession) (string, error) { return "", context.DeadlineExceeded }, "bgmcp: no owner for this request: context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, newServer(t, newManager(t), newTestTools(), bgmcp.WithOwnerFunc(tc.owner)))
			var res struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			}
			for _, tool := range []string{"echo", "list_tasks"} {
				decode(t, c.call("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"text": "x"}}), &res)
				if !res.IsError || res.Content[0].Text != tc.want {
					t.Errorf("%s: %+v, want isError %q", tool, res, tc.want)
				}
			}
			for method, params := range map[string]map[string]any{
				"tools/call": {"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{}},
				"tasks/get":  {"taskId": "x"},
				"tasks/list": {},
			} {
				if _, err := c.try(method, params); err == nil || err.Code != -32600 || err.Message != tc.want {
					t.Errorf("%s: %v, want -32600 %q", method, err, tc.want)
				}
			}
		})
	}
}
