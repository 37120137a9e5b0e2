// Command conformance is the MCP host that the official conformance runner
// (@modelcontextprotocol/conformance) tests in TestConformance: a host's
// own SDK server with every feature the runner's scenarios call
// (everything.go), bgtask's tools and tasks attached to it
// (bgmcp.WithSDKServer) with the tasks extension's fixtures (tasks.go),
// served from one endpoint in both revisions, with SSE resumption.
//
// It listens on 127.0.0.1 at a free port, prints "listening <url>" on
// stdout, and serves until it is interrupted or killed.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m, err := bgtask.New()
	if err != nil {
		return err
	}
	defer m.Shutdown(context.Background())

	host := mcp.NewServer(&mcp.Implementation{Name: "bgtask-conformance", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler:  completionHandler,
		SubscribeHandler:   subscribeHandler,
		UnsubscribeHandler: unsubscribeHandler,
	})
	registerTools(host)
	registerResources(host)
	registerPrompts(host)
	s, err := bgmcp.NewServer(m, bgmcp.WithSDKServer(host), bgmcp.WithEventStore(mcp.NewMemoryEventStore(nil)))
	if err != nil {
		return err
	}
	if err := addTaskTools(s); err != nil {
		return err
	}
	go watchedResourceUpdater(ctx, host)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler()}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
