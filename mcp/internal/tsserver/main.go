// Command tsserver is the MCP server that the TypeScript client suite
// (mcp/tsclient/suite.mjs, run by TestTypeScriptClient) drives over stdio:
// a bgmcp server on a SQLite store, serving one owner's tasks and a few
// tools made for the suite's scenarios (see tools.go).
//
//	tsserver -db tasks.db -owner alice
//	tsserver -db tasks.db -http 127.0.0.1:0
//	tsserver -pg postgres://… -instance a -http 127.0.0.1:0 -owner alice
//
// Several processes may share one database file with different owners;
// each serves only its own owner's tasks. With -http it serves streamable
// HTTP instead, at the URL it prints as its first line on stdout
// ("listening http://127.0.0.1:PORT/mcp"), each session its own owner
// unless -owner names one. The process ends when stdin is closed (its
// client ended the stdio session, or the process that started it for HTTP
// is done), or on SIGINT or SIGTERM (running tasks are then cancelled).
// Killing it with SIGKILL leaves its running tasks recorded as running:
// the next process with the same owner and file reports them failed.
// With -pg instead of -db it runs on PostgreSQL as the instance -instance
// names: several such processes are a fleet (TestModernFleetProcesses).
// Logs go to stderr; stdout carries the protocol only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// busyTimeout is how long a write waits for another process's lock on the
// shared file: a hang guard, never reached by a working suite.
const busyTimeout = 2 * time.Minute

func main() {
	db := flag.String("db", "", "SQLite database `file` (created if missing; may be shared by several processes)")
	pg := flag.String("pg", "", "PostgreSQL `dsn`, instead of -db: several processes are a fleet")
	instance := flag.String("instance", "", "the `name` of this instance, with -pg")
	owner := flag.String("owner", "", "the `owner` whose tasks this server serves (with -http, default: one per session)")
	addr := flag.String("http", "", "serve streamable HTTP on this `address` instead of stdio")
	flag.Parse()
	if (*db == "") == (*pg == "") || (*addr == "" && strings.TrimSpace(*owner) == "") || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: tsserver (-db FILE | -pg DSN [-instance NAME]) (-owner OWNER | -http ADDRESS [-owner OWNER])")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, storeFlags{db: *db, pg: *pg, instance: *instance}, *owner, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "tsserver:", err)
		os.Exit(1)
	}
}

// run serves one stdio session, or streamable HTTP, until it ends, then
// shuts the Manager down (cancelling what still runs) and closes the store.
func run(ctx context.Context, sf storeFlags, owner, addr string) (err error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var st interface {
		store.Store
		Close() error
	}
	var mopts []bgtask.Option
	var pst *pgstore.Store
	if sf.pg != "" {
		if pst, err = pgstore.Open(ctx, sf.pg); err != nil {
			return err
		}
		st = pst
		if sf.instance != "" {
			mopts = append(mopts, bgtask.WithInstance(sf.instance))
		}
	} else if st, err = sqlitestore.Open(ctx, sf.db, sqlitestore.WithBusyTimeout(busyTimeout), sqlitestore.WithLogger(logger)); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	m, err := bgtask.New(append(mopts, bgtask.WithStore(st), bgtask.WithLogger(logger))...)
	if err != nil {
		return err
	}
	if pst != nil {
		// The instance joins the fleet: heartbeat, cancels and messages
		// from the other instances.
		if err := pst.Start(ctx, m.Runtime()); err != nil {
			return err
		}
	}
	// No deadline: the tools end when their ctx does, so a hang here is a
	// bug that the suite's own guard reports.
	defer func() { err = errors.Join(err, m.Shutdown(context.WithoutCancel(ctx))) }()

	opts := []bgmcp.Option{bgmcp.WithImplementation(&mcp.Implementation{Name: "bgtask-tsserver", Version: "test"})}
	if owner != "" {
		opts = append(opts, bgmcp.WithOwnerFunc(func(context.Context, *mcp.ServerSession) (string, error) { return owner, nil }))
	}
	srv, err := bgmcp.NewServer(m, opts...)
	if err != nil {
		return err
	}
	for _, t := range newTools().list() {
		if err := srv.AddTool(t); err != nil {
			return err
		}
	}
	if addr != "" {
		return serveHTTP(ctx, srv, addr)
	}
	return srv.Run(ctx, &mcp.StdioTransport{})
}

// storeFlags say which store to run on.
type storeFlags struct {
	db, pg, instance string
}
