package bga2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// Server serves one sub-agent as an A2A agent over JSON-RPC: each task a
// client starts is a run of the agent function, spawned with
// Owner.SpawnAgent for the owner the request authenticates as.
//
// Create it with New; the zero value is not usable, and a Server must not be
// copied. Its methods and its handler are safe for concurrent use. Close
// stops the goroutines it started; the Manager, and so the tasks, stay the
// host's: Manager.Shutdown ends them (and the server's streams, which then
// report each task's final state).
//
// The agent function runs as a bgtask task: a panic in it fails the task,
// with the panic value as the error the client sees. A request's context
// bounds its own wait (a blocking send, a stream, a cancel waiting for the
// task to stop), never the task: a client that goes away leaves its task
// running, to be read, continued or cancelled later.
//
// The server reads the inbox of each owner it serves (that is where the
// sub-agents' events arrive), so an owner id it serves must not also be used
// by a Plugin or another reader of the same Manager.
//
// Besides the Manager's records, a Server holds in memory the results that
// the records keep only cut (up to WithMaxKeptResultBytes in all, so that
// the client gets them whole) and the clients' message ids of the recent
// history; both go with the Server.
type Server struct {
	m       *bgtask.Manager
	agent   bgtask.Func
	card    Card
	cfg     config
	hub     *hub
	rpc     http.Handler
	results *kept
	msgIDs  messageIDs

	challenges []string // the WWW-Authenticate challenges of a 401
}

// New returns a Server that runs agent on m for each new A2A task. card
// describes the agent; one of WithOwner or WithOwnerFunc says whom each
// request acts for (ErrNoOwner without either). Errors: a nil m or agent, a
// card without a name, ErrNoOwner, or an option's error.
func New(m *bgtask.Manager, agent bgtask.Func, card Card, opts ...Option) (*Server, error) {
	if m == nil {
		return nil, errors.New("bga2a: nil Manager")
	}
	if agent == nil {
		return nil, fmt.Errorf("%w: nil agent function", bgtask.ErrInvalidArgument)
	}
	if err := card.validate(); err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if cfg.owner == nil {
		return nil, ErrNoOwner
	}
	s := &Server{m: m, agent: agent, card: card, cfg: cfg, hub: newHub(m), results: newKept(cfg.maxKept)}
	s.hub.ended = s.results.settle
	s.challenges = challenges(card.Name, cfg.schemes, cfg.security)
	s.rpc = a2asrv.NewJSONRPCHandler(handler{s})
	return s, nil
}

// Handler returns the HTTP handler of the agent: the agent card at
// AgentCardPath (GET, public), and the JSON-RPC endpoint (POST) at every
// other path. Mount it at the root of the card's URL.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(AgentCardPath, s.serveCard)
	mux.HandleFunc("/", s.serveRPC)
	return mux
}

// Close stops the goroutines the server started to read the owners' inboxes
// and waits for them. Open streams end (a stream whose task has not ended
// reports an error); later requests fail with ErrClosed. It leaves the
// Manager and its tasks alone. Close is idempotent.
func (s *Server) Close() {
	s.hub.close()
}

type ownerKey struct{}

// serveRPC names the request's owner, reads the body (up to the cap), then
// hands the request to the JSON-RPC handler.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	owner, err := s.cfg.owner(r)
	if err != nil || blank(owner) {
		for _, c := range s.challenges {
			w.Header().Add("WWW-Authenticate", c)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.maxRequest+1))
		_ = r.Body.Close()
		switch {
		case err != nil:
			writeRPCError(w, -32700, "parse error", fmt.Sprintf("parse error: reading the request body: %v", err))
			return
		case int64(len(body)) > s.cfg.maxRequest:
			writeRPCError(w, -32600, a2a.ErrInvalidRequest.Error(),
				fmt.Sprintf("the request body is longer than %d bytes: %v", s.cfg.maxRequest, a2a.ErrInvalidRequest))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.rpc.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
}

// writeRPCError answers a request the JSON-RPC handler did not read with a
// JSON-RPC error, as that handler does: HTTP 200, no id, the detail in
// data.error.
func writeRPCError(w http.ResponseWriter, code int, message, detail string) {
	type rpcError struct {
		Code    int               `json:"code"`
		Message string            `json:"message"`
		Data    map[string]string `json:"data"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", nil, rpcError{code, message, map[string]string{"error": detail}}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// ownerOf returns the Owner view of the request in ctx.
func (s *Server) ownerOf(ctx context.Context) (bgtask.Owner, error) {
	id, ok := ctx.Value(ownerKey{}).(string)
	if !ok || blank(id) {
		return bgtask.Owner{}, bgtype.ErrInvalidOwner
	}
	return s.m.Owner(id), nil
}
