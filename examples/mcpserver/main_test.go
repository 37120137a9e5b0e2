package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// Bad input on stdio never stops the server: a malformed line and a line
// of JSON nested 100,000 deep are each answered with a parse error
// (-32700, id null), and then a valid request is answered and a task
// started before is still running.
func TestBadLines(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ran := make(chan error, 1)
		go func() { ran <- run(ctx, []string{"-db", db}, &mcp.IOTransport{Reader: inR, Writer: outW}) }()
		// The server's answers (the lines with an id), read in the bubble.
		answers := make(chan map[string]any, 16)
		read := make(chan struct{})
		go func() {
			defer close(read)
			for sc := bufio.NewScanner(outR); sc.Scan(); {
				var msg map[string]any
				if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
					t.Errorf("server wrote %q: %v", sc.Text(), err)
				}
				if _, ok := msg["id"]; ok {
					answers <- msg
				}
			}
		}()
		defer func() { // on failure too: the server and the reader end
			cancel()
			inW.Close()
			outR.Close()
			<-read
		}()
		send := func(line string) {
			t.Helper()
			if _, err := io.WriteString(inW, line+"\n"); err != nil {
				t.Fatalf("writing: %v", err)
			}
		}
		// next returns the next answer. The server answers without waiting
		// on a timer, so in the bubble a minute passes (the demo task's
		// timers) only when it will never answer.
		next := func() map[string]any {
			t.Helper()
			select {
			case msg := <-answers:
				return msg
			case <-time.After(time.Minute):
				t.Fatal("no answer in a minute")
				return nil
			}
		}
		send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
		if res := next(); res["result"] == nil {
			t.Fatalf("initialize: %v", res)
		}
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_count","arguments":{"n":600},"task":{}}}`)
		res := next()
		taskID, _ := res["result"].(map[string]any)["task"].(map[string]any)["taskId"].(string)
		if taskID == "" {
			t.Fatalf("slow_count as a task: %v", res)
		}

		for _, bad := range []string{`{"jsonrpc":"2.0","id":3,"method":`, strings.Repeat("[", 100_000)} {
			send(bad)
			res := next()
			e, _ := res["error"].(map[string]any)
			if res["id"] != nil || e["code"] != float64(-32700) || e["message"] != "Parse error: not a JSON value" {
				t.Errorf("answer to %.40q: %v", bad, res)
			}
		}

		send(`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`)
		res = next()
		if st, _ := res["result"].(map[string]any)["status"].(string); res["id"] != float64(4) || st != "working" {
			t.Errorf("tasks/get after the bad lines: %v", res)
		}
		inW.Close()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}
