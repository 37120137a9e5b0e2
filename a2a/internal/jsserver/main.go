// Command jsserver is the A2A server the JavaScript client suite drives
// (a2a/jsclient/suite.mjs): a bgtask sub-agent served by package bga2a on
// 127.0.0.1, on a free port. It prints its URL as the first line of stdout
// and serves until stdin is closed or it gets SIGINT or SIGTERM; then it
// shuts the Manager down and exits.
//
// The owner of a request is the X-Owner header: a stand-in for the
// authentication a real host reads the owner from. A request without it is
// refused (HTTP 401), and the agent card declares it as an API key
// security scheme.
//
// For the suite only, GET /debug/wait/<task id> waits until any owner's task
// (a sub-agent's child too) has ended and returns its record: how the suite
// sees that a cancel reached the sub-agent's own tasks. A real server has no
// such endpoint.
//
// The sub-agent does what its first message says:
//
//	echo <text>  emits a progress event, then completes with "echo: <text>"
//	chat         answers every message "got: <text>" until "bye", then
//	             completes with {"messages": n}
//	wait         starts a child task, sends the message "child <id>", and
//	             waits, with the child, until cancelled
//	ask          asks "What is your name?" and completes with "hello <answer>"
//	big <n>      completes with a string of n bytes (bigText), over the
//	             record's cap of 64 KiB for n = 204800
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
	bga2a "github.com/bgtask/bgtask/a2a"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jsserver:", err)
		os.Exit(1)
	}
}

func run() error {
	m, err := bgtask.New()
	if err != nil {
		return err
	}
	srv, err := bga2a.New(m, agent, bga2a.Card{
		Name:        "bgtask test agent",
		Description: "A bgtask sub-agent served over A2A for the JavaScript client suite.",
		Skills: []a2a.AgentSkill{{ID: "demo", Name: "demo", Description: "echo, chat, wait, ask",
			Tags: []string{"test"}}},
	}, bga2a.WithOwnerFunc(func(r *http.Request) (string, error) {
		if o := r.Header.Get("X-Owner"); o != "" {
			return o, nil
		}
		return "", errors.New("no X-Owner header")
	}), bga2a.WithSecurityScheme("owner", a2a.APIKeySecurityScheme{
		In: a2a.APIKeySecuritySchemeInHeader, Name: "X-Owner",
		Description: "the owner of the request (a stand-in for a real credential)",
	}))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	mux.HandleFunc("GET /debug/wait/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := m.Wait(r.Context(), r.PathValue("id"))
		if _, failed := errors.AsType[*bgtask.TaskError](err); failed {
			err = nil // the record says how it failed
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rec)
	})
	hs := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())

	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-stop:
	case <-sig:
	case err := <-served:
		return err
	}
	ctx := context.Background()
	err = m.Shutdown(ctx) // ends the tasks, and so the open streams
	srv.Close()
	return errors.Join(err, hs.Shutdown(ctx))
}

// agent reads its first message and does what it says.
func agent(ctx context.Context, t *bgtask.Task) (any, error) {
	in := &inbox{t: t}
	first, err := in.next(ctx)
	if err != nil {
		return nil, err
	}
	cmd, arg, _ := strings.Cut(first.Content, " ")
	switch cmd {
	case "echo":
		if err := t.Emit("progress", map[string]any{"step": "echo"}); err != nil {
			return nil, err
		}
		return "echo: " + arg, nil
	case "chat":
		for n := 1; ; n++ {
			if err := t.Emit(bgtype.EventTypeMessage, bgtype.Message{From: t.ID(), Content: "got: " + first.Content}); err != nil {
				return nil, err
			}
			if first, err = in.next(ctx); err != nil {
				return nil, err
			}
			if first.Content == "bye" {
				return map[string]any{"messages": n + 1}, nil
			}
		}
	case "wait":
		self, err := t.Agent()
		if err != nil {
			return nil, err
		}
		child, err := self.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, bgtask.WithName("child"))
		if err != nil {
			return nil, err
		}
		if err := t.Emit(bgtype.EventTypeMessage, bgtype.Message{From: t.ID(), Content: "child " + child}); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case "big":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 8<<20 {
			return nil, fmt.Errorf("big %q: want a size in bytes, at most 8 MiB", arg)
		}
		return bigText(n), nil
	case "ask":
		answer, err := t.RequestInput(ctx, "What is your name?")
		if err != nil {
			return nil, err
		}
		return "hello " + answer.Content, nil
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

// bigText is n bytes of a text with characters JSON escapes (quotes,
// HTML, newlines) and non-ASCII ones; suite.mjs builds the same text.
func bigText(n int) string {
	const unit = "abc<&>\"é\n" // 10 bytes
	s := strings.Repeat(unit, n/len(unit)+1)
	return s[:n-n%len(unit)] + strings.Repeat("x", n%len(unit))
}

// inbox reads a sub-agent's messages one at a time.
type inbox struct {
	t   *bgtask.Task
	buf []bgtype.Message
}

func (in *inbox) next(ctx context.Context) (bgtype.Message, error) {
	for len(in.buf) == 0 {
		if err := in.t.Inbox().Wait(ctx); err != nil {
			return bgtype.Message{}, err
		}
		for _, ev := range in.t.Inbox().Drain() {
			if m, ok := ev.Message(); ok {
				in.buf = append(in.buf, m)
			}
		}
	}
	m := in.buf[0]
	in.buf = in.buf[1:]
	return m, nil
}
