package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo serves its tools in process, on a real SQLite file, in a
// synctest bubble: the tools' pauses are fake time.
func TestDemoServes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st, ct := mcp.NewInMemoryTransports()
		ran := make(chan error, 1)
		go func() { ran <- run(ctx, []string{"-db", db}, st) }()
		var steps []string
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				steps = append(steps, r.Params.Message)
			},
		}).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if want := []string{"cancel_task", "fetch_report", "get_task", "list_tasks", "send_message", "slow_count", "wait_task"}; !slices.Equal(names, want) {
			t.Errorf("tools %v, want %v", names, want)
		}

		params := &mcp.CallToolParams{Name: "slow_count", Arguments: map[string]any{"n": 3}}
		params.SetProgressToken("count")
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the progress handler has run
		if got := res.Content[0].(*mcp.TextContent).Text; res.IsError || got != `{"counted":3}` {
			t.Errorf("slow_count: %v %s", res.IsError, got)
		}
		if want := []string{"counted to 1", "counted to 2", "counted to 3"}; !slices.Equal(steps, want) {
			t.Errorf("progress %v, want %v", steps, want)
		}

		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"topic": "Go"}})
		if err != nil {
			t.Fatal(err)
		}
		var report map[string]string
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &report); err != nil || report["report"] != "Nothing new about Go this week." {
			t.Errorf("fetch_report: %v %v", report, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow_count", Arguments: map[string]any{"n": 0}})
		if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != `slow_count: "n" must be an integer from 1 to 600` {
			t.Errorf("bad n: %v %v", res, err)
		}
		cs.Close()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

func TestBadFlag(t *testing.T) {
	st, _ := mcp.NewInMemoryTransports()
	if err := run(t.Context(), []string{"-nope"}, st); err == nil || err.Error() != "flag provided but not defined: -nope" {
		t.Errorf("run -nope: %v", err)
	}
}
