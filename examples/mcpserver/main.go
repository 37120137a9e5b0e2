// Command mcpserver serves bgtask over MCP on stdio, with the task metadata
// in a SQLite file: an MCP host (Claude Desktop, an IDE, the MCP inspector)
// gets the five task tools (list_tasks, get_task, cancel_task,
// send_message, wait_task) and two long-running demo tools, slow_count and
// fetch_report, which it can call in the foreground or as tasks (the tasks
// protocol of revision 2025-11-25, or the tasks extension of 2026-07-28,
// whichever revision the host speaks).
//
// Every session acts for one local owner, so a task started before a
// restart is still listed after it: as failed, with a message saying the
// process that ran it is gone.
//
//	go run ./examples/mcpserver [-db path]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

// owner is the one owner of this local server's sessions.
const owner = "local"

// run serves one session over t until it ends, then shuts the Manager
// down (cancelling the tasks still running).
func run(ctx context.Context, args []string, t mcp.Transport) (err error) {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	db := fs.String("db", defaultDB(), "SQLite file that keeps the task metadata")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*db), 0o700); err != nil {
		return err
	}
	st, err := sqlitestore.Open(ctx, *db)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	m, err := bgtask.New(bgtask.WithStore(st))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Shutdown(context.Background())) }()
	if err := st.Start(ctx, m.Runtime()); err != nil { // `bgtask cancel ID` from another terminal reaches the tasks
		return err
	}
	s, err := bgmcp.NewServer(m,
		bgmcp.WithImplementation(&mcp.Implementation{Name: "bgtask-mcpserver", Version: "v0"}),
		bgmcp.WithOwnerFunc(func(context.Context, *mcp.ServerSession) (string, error) { return owner, nil }),
	)
	if err != nil {
		return err
	}
	for _, tool := range demoTools() {
		if err := s.AddTool(tool); err != nil {
			return err
		}
	}
	return s.Run(ctx, t)
}

// defaultDB is the database in the user's cache directory.
func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "bgtask-mcpserver", "tasks.db")
}

// demoTools are two long-running tools.
func demoTools() []bgmcp.Tool {
	return []bgmcp.Tool{
		{
			Name:        "slow_count",
			Description: "Counts from 1 to n, one number a second, reporting progress; returns the count.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":600}},"required":["n"],"additionalProperties":false}`),
			Run:         slowCount,
		},
		{
			Name:        "fetch_report",
			Description: "Prepares a short report on a topic; takes about five seconds.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string","minLength":1}},"required":["topic"],"additionalProperties":false}`),
			Run:         fetchReport,
		},
	}
}

func slowCount(ctx context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.N < 1 || args.N > 600 {
		return nil, errors.New(`slow_count: "n" must be an integer from 1 to 600`)
	}
	for i := 1; i <= args.N; i++ {
		if err := pause(ctx, time.Second); err != nil {
			return nil, err
		}
		call.Progress(float64(i), float64(args.N), fmt.Sprintf("counted to %d", i))
	}
	return map[string]int{"counted": args.N}, nil
}

func fetchReport(ctx context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Topic string `json:"topic"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Topic == "" {
		return nil, errors.New(`fetch_report: "topic" must be a non-empty string`)
	}
	for i, step := range []string{"searching", "reading", "writing"} {
		call.Progress(float64(i), 3, step)
		if err := pause(ctx, 5*time.Second/3); err != nil {
			return nil, err
		}
	}
	return map[string]string{"topic": args.Topic, "report": "Nothing new about " + args.Topic + " this week."}, nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
