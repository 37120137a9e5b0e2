package bgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// A host serves its long-running tool over streamable HTTP, each caller
// acting as the user its authentication found.
func Example() {
	mux := http.NewServeMux() // the host's; or http.DefaultServeMux

	m, err := bgtask.New() // bgtask.WithStore(...) for durable records
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(context.Background())
	// The caller of each HTTP request, as the host's authentication put it
	// on the request's context: every request of a session must be its owner's.
	ownerOf := func(ctx context.Context, _ *mcp.ServerSession) (string, error) {
		if info := auth.TokenInfoFromContext(ctx); info != nil {
			return info.UserID, nil
		}
		return "", errors.New("not signed in")
	}
	s, err := bgmcp.NewServer(m,
		bgmcp.WithOwnerFunc(ownerOf),
		bgmcp.WithSessionTimeout(10*time.Minute), // idle sessions end (default 30 min)
		bgmcp.WithMaxSessions(1000),              // then 503 (default 10,000)
	)
	if err != nil {
		panic(err)
	}
	err = s.AddTool(bgmcp.Tool{
		Name:        "build",
		Description: "Builds the project.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`),
		Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
			call.Progress(1, 2, "compiling")
			// ... work, stopping when ctx ends ...
			call.Progress(2, 2, "linking")
			return map[string]string{"artifact": "out/app"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	mux.Handle("/mcp", s.Handler()) // behind the host's authentication middleware
	// http.ListenAndServe(addr, mux)

	// Output:
}

// A host on SQLite that keeps ended records for a week tells the Server,
// so that each task's ttl says so, and gives whole results more memory than
// the default: tasks/result returns a result longer than the record's cap
// whole while the Server keeps it, a cut copy that says so after that.
func ExampleWithRetainFor() {
	ctx := context.Background()
	const week = 7 * 24 * time.Hour
	st, err := sqlitestore.Open(ctx, "tasks.db", sqlitestore.WithRetainFor(week))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	m, err := bgtask.New(bgtask.WithStore(st))
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(ctx)
	s, err := bgmcp.NewServer(m, bgmcp.WithRetainFor(week), bgmcp.WithResultMemory(256<<20))
	if err != nil {
		panic(err)
	}
	_ = s.Run(ctx, &mcp.StdioTransport{})
}
