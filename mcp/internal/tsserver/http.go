package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// serveHTTP serves srv's streamable HTTP handler at /mcp on addr until ctx
// ends or stdin reaches its end, after printing the URL on stdout.
func serveHTTP(ctx context.Context, srv *bgmcp.Server, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := &http.Server{Handler: mux}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if _, err := fmt.Printf("listening http://%s/mcp\n", ln.Addr()); err != nil {
		_ = hs.Close()
		<-served
		return err
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Close, not Shutdown: a client's event stream would hold Shutdown.
	err = hs.Close()
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
