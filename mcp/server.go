package bgmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// The MCP revisions whose tasks the Server serves. Both are served from one
// endpoint, each request in its own (see Server.Handler).
const (
	// ProtocolVersion is the newest MCP revision served: stateless, with
	// tasks in the io.modelcontextprotocol/tasks extension (TasksExtension).
	ProtocolVersion = "2026-07-28"
	// LegacyProtocolVersion is the newest revision of the initialize
	// handshake, whose core has the tasks protocol of 2025-11-25 (its
	// older revisions are served too, without tasks).
	LegacyProtocolVersion = "2025-11-25"
)

// ErrNoOwner refuses a request whose owner could not be found: the owner
// function returned an error (wrapped with it) or a blank id.
var ErrNoOwner = errors.New("bgmcp: no owner for this request")

// ErrNotSessionOwner refuses an HTTP request for a session that another
// owner opened (see WithOwnerFunc). Its text names neither owner.
var ErrNotSessionOwner = errors.New("bgmcp: this session belongs to another caller")

// ErrTooManySessions refuses an HTTP request that would open a session
// past the cap (see WithMaxSessions).
var ErrTooManySessions = errors.New("bgmcp: too many open sessions")

// Server serves one Manager over MCP: the five model-facing task tools of
// bgtask, the host's own tools (AddTool), and the tasks protocol for them.
// Every session acts for one owner (see WithOwnerFunc) and sees that
// owner's tasks only.
//
// A Server is safe for concurrent use and serves any number of sessions
// (over HTTP, up to WithMaxSessions at once). It has no zero value: use
// NewServer. Tasks outlive the session that started them; the Manager's
// Shutdown ends them.
type Server struct {
	m         *bgtask.Manager
	cfg       config
	sdk       *mcp.Server
	sdkHTTP   http.Handler // sessions: revisions up to LegacyProtocolVersion
	sdkModern http.Handler // stateless: ProtocolVersion
	handler   http.Handler
	whole     *wholeResults // the whole results that task records hold cut

	mu       sync.Mutex
	tools    map[string]*hostTool // the host's tools, by name
	restored map[string]bool      // owners Restore has run for
	sessions map[string]*session  // open sessions, by id
	http     int                  // how many of them are HTTP sessions
	opening  int                  // HTTP requests that may open a session, in flight
}

// session is an open session: its owner once known, and, for an HTTP
// session, what its idle timer needs (idle.go). Its fields are guarded by
// Server.mu.
type session struct {
	ss    *mcp.ServerSession // nil for Run's
	owner string             // "" until the owner function names one

	active  int         // HTTP requests of it in flight, its GET stream included
	opening bool        // the request that opened it is one of them
	idle    *time.Timer // ends it once idle; nil while a request is in flight
	gone    bool        // forgotten: no timer anymore
}

// NewServer returns a Server for m, with the five task tools registered.
// Errors: a nil Manager, or an Option's.
func NewServer(m *bgtask.Manager, opts ...Option) (*Server, error) {
	if m == nil {
		return nil, errors.New("bgmcp: NewServer: nil Manager")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	s := &Server{
		m:        m,
		cfg:      cfg,
		tools:    make(map[string]*hostTool),
		restored: make(map[string]bool),
		sessions: make(map[string]*session),
		whole:    newWholeResults(cfg.results.budget()),
	}
	// Revisions newer than the tasks extension's are not offered.
	versions := slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v > ProtocolVersion })
	s.sdk = cfg.sdk
	if s.sdk == nil {
		s.sdk = mcp.NewServer(cfg.impl, &mcp.ServerOptions{HasTools: true, SupportedProtocolVersions: versions})
	}
	for _, t := range agent.Tools(m.Owner("schema")) {
		s.sdk.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema}, s.taskTool(t.Name))
	}
	if err := s.addTaskMethods(); err != nil {
		return nil, err
	}
	s.sdk.AddReceivingMiddleware(s.middleware)
	s.sdkHTTP = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk }, &mcp.StreamableHTTPOptions{
		// The idle timeout is the Server's (idle.go): the SDK's would end
		// a session whose client listens on its GET stream.
		EventStore: cfg.eventStore,
		// serveHTTP caps the body the client sent; what reaches the SDK is
		// that body with "task" moved (rewriteBody), which may be longer.
		MaxRequestBodyBytes: -1,
	})
	// The SDK serves 2026-07-28 over streamable HTTP only without sessions.
	s.sdkModern = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		MaxRequestBodyBytes:          -1,
		PropagateRequestCancellation: true,
	})
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Run serves one session over t (for example &mcp.StdioTransport{}) until
// the client ends it or ctx ends, and returns why. The session's tasks go
// on running after it ends.
//
// Over *mcp.StdioTransport and *mcp.IOTransport, each line is one JSON-RPC
// message: a line that is not (malformed or too deeply nested JSON, a
// batch, a line longer than the transport's MaxLineLength) is answered
// with a JSON-RPC error of id null (-32700 parse error, or -32600) and the
// session goes on.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	tt := &taskTransport{inner: lineTransportFor(t), s: s}
	err := s.sdk.Run(ctx, tt)
	if tt.id != "" {
		s.forget(tt.id)
	}
	return err
}

// Handler returns the streamable HTTP handler serving this Server. The
// same handler is returned on every call. A request whose
// Mcp-Protocol-Version header names 2026-07-28 (or a POST outside a
// session whose body carries the per-request protocol version) is served
// statelessly, in that revision; any other is served as the MCP streamable
// HTTP transport of 2025-11-25 defines, one session per client. A client
// picks by the first request it sends: server/discover for 2026-07-28,
// initialize for the older revisions.
//
// In 2026-07-28 there is no session: WithOwnerFunc is called for every
// request with its ctx and a session without an id. A request it names no
// owner for (the default owner, the session id, is then blank) is
// anonymous: each task such a request starts is an owner of its own, and
// the task's handle ("anon.", a random secret, ".", the task id) is the
// only credential that reaches it. Mount it behind the host's
// authentication, which puts the caller on each request's ctx, and read
// the caller there in WithOwnerFunc: every request of a session must come
// from the caller that opened it.
//
// Limits: a session idle for WithSessionTimeout ends; at most
// WithMaxSessions sessions are open at once (then 503); a request body
// longer than WithMaxBodyBytes is refused (413). Errors of the handler
// itself are JSON-RPC error responses with id null.
func (s *Server) Handler() http.Handler { return s.handler }

// serveHTTP checks a request before the SDK's handler serves it: its caller
// must be its session's owner, a new session must fit under the cap, and
// its body must fit under the body cap (then "task" is moved, see
// rewriteBody).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = -1
		if modernRequest(r, body) {
			if id, err := checkTaskName(r, body); err != nil {
				writeRPCError(w, http.StatusBadRequest, id, err)
				return
			}
			s.sdkModern.ServeHTTP(w, r)
			return
		}
	} else if modernRequest(r, nil) {
		s.sdkModern.ServeHTTP(w, r) // 405: no sessions, no GET stream
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if err := s.checkCaller(r.Context(), id); err != nil {
			writeHTTPError(w, http.StatusForbidden, err)
			return
		}
		if r.Method == http.MethodDelete {
			// The session is closed when the SDK answers: its slot is
			// free at once for the client's next session.
			sw := &statusWriter{ResponseWriter: w}
			s.sdkHTTP.ServeHTTP(sw, r)
			if sw.status == http.StatusNoContent {
				s.forget(id)
			}
			return
		}
		defer s.enter(id)()
	} else if r.Method == http.MethodPost {
		release, err := s.reserveSession()
		if err != nil {
			writeHTTPError(w, http.StatusServiceUnavailable, err)
			return
		}
		defer release()
		defer func() {
			if id := w.Header().Get("Mcp-Session-Id"); id != "" {
				s.opened(id)
			}
		}()
	}
	s.sdkHTTP.ServeHTTP(w, r)
}

// readBody reads a POST's body under the body cap, with "task" moved (see
// rewriteBody); a body too long or unreadable is answered here.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("bgmcp: request body longer than %d bytes", s.cfg.maxBody))
		} else {
			writeHTTPError(w, http.StatusBadRequest, errors.New("bgmcp: request body unreadable"))
		}
		return nil, false
	}
	return rewriteBody(body), true
}

// modernRequest reports whether an HTTP request follows the 2026-07-28
// revision (or a later one, which the SDK refuses with the versions it
// serves): its Mcp-Protocol-Version header says so, or, without one, a
// POST outside any session whose body carries the per-request protocol
// version (the SDK then answers that the header is missing).
func modernRequest(r *http.Request, body []byte) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= ProtocolVersion
	}
	return body != nil && r.Header.Get("Mcp-Session-Id") == "" && bytes.Contains(body, []byte(mcp.MetaKeyProtocolVersion))
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkTaskName checks the routing header of a task request of the
// extension: an Mcp-Name that is not its params.taskId is -32020 (header
// mismatch), as the SDK answers for a tool's name. It returns the
// request's id with the error.
func checkTaskName(r *http.Request, body []byte) (json.RawMessage, *jsonrpc.Error) {
	name, ok := r.Header["Mcp-Name"]
	if !ok || !bytes.Contains(body, []byte(`"tasks/`)) {
		return nil, nil
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID any `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil // not one request: the SDK answers it
	}
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return nil, nil
	}
	if id, _ := req.Params.TaskID.(string); len(name) != 1 || name[0] != id {
		return req.ID, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("Mcp-Name header %q does not match params.taskId", strings.Join(name, ","))}
	}
	return nil, nil
}

// writeRPCError answers an HTTP request with a JSON-RPC error response of
// the request's id (null when nil).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, err *jsonrpc.Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": err})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeHTTPError answers an HTTP request with a JSON-RPC error response
// (id null: the request was not read) of code -32600 and err's text.
func writeHTTPError(w http.ResponseWriter, status int, err error) {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": jsonrpc.CodeInvalidRequest, "message": err.Error()},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// checkCaller authorises a request for an HTTP session: the owner
// function, on the request's ctx, must name the session's owner. A session
// whose owner is not known yet (the owner function named none when it
// opened) becomes the caller's. An unknown session passes: the SDK
// answers 404.
func (s *Server) checkCaller(ctx context.Context, id string) error {
	s.mu.Lock()
	sess := s.sessions[id]
	var ss *mcp.ServerSession
	if sess != nil {
		ss = sess.ss
	}
	s.mu.Unlock()
	if ss == nil {
		return nil
	}
	caller, err := s.cfg.ownerFunc(ctx, ss)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNoOwner, err)
	case strings.TrimSpace(caller) == "":
		return ErrNoOwner
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.owner == "" {
		sess.owner = caller
	}
	if sess.owner != caller {
		return ErrNotSessionOwner
	}
	return nil
}

// reserveSession counts an HTTP request that may open a session (a POST
// without a session id) until release is called, or refuses it when the
// open sessions and such requests reach the cap.
func (s *Server) reserveSession() (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http+s.opening >= s.cfg.maxSessions {
		return nil, fmt.Errorf("%w (at most %d): end a session or retry later", ErrTooManySessions, s.cfg.maxSessions)
	}
	s.opening++
	return func() {
		s.mu.Lock()
		s.opening--
		s.mu.Unlock()
	}, nil
}

// track records an HTTP session at its first request, and forgets it when
// it ends. Run's sessions are recorded by their transport instead.
func (s *Server) track(ss *mcp.ServerSession) {
	id := ss.ID()
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[id]; ok {
		return
	}
	// The request that opens it is in flight: serveHTTP calls opened when
	// it has answered, and the idle timer starts then.
	s.sessions[id] = &session{ss: ss, active: 1, opening: true}
	s.http++
	go func() {
		// The session's end: its client deleted it, it timed out, or its
		// connection broke. Nothing else owns this goroutine; it ends with
		// the session.
		_ = ss.Wait()
		s.forget(id)
	}()
}

// openRun records a session of Run before its first request.
func (s *Server) openRun(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = &session{}
}

// forget drops an ended session. With the default owner (the session's
// id), the owner can never come back: its restore mark goes too.
func (s *Server) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return
	}
	if sess.owner == id {
		delete(s.restored, id)
	}
	if sess.ss != nil {
		s.http--
	}
	sess.gone = true
	if sess.idle != nil {
		sess.idle.Stop()
		sess.idle = nil
	}
	delete(s.sessions, id)
}

// OpenSessions returns the number of open sessions: HTTP sessions and
// sessions served by Run. Safe for concurrent use.
func (s *Server) OpenSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// sessionOwner returns the owner of ss's session: the one the owner
// function named for it first. Until it names one, each request calls it
// again with its ctx.
func (s *Server) sessionOwner(ctx context.Context, ss *mcp.ServerSession) (string, error) {
	id := ss.ID()
	s.mu.Lock()
	if sess := s.sessions[id]; sess != nil && sess.owner != "" {
		s.mu.Unlock()
		return sess.owner, nil
	}
	s.mu.Unlock()
	owner, err := s.cfg.ownerFunc(ctx, ss)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoOwner, err)
	}
	if strings.TrimSpace(owner) == "" {
		return "", ErrNoOwner
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[id]; sess != nil {
		if sess.owner == "" {
			sess.owner = owner
		}
		if sess.owner != owner { // two first requests named two owners
			return "", ErrNotSessionOwner
		}
	}
	return owner, nil
}

// owner finds the owner of a request: its session's. The first time the
// Server sees an owner it restores the owner's records: a task that a
// stopped process ran becomes interrupted (failed to the client).
func (s *Server) owner(ctx context.Context, ss *mcp.ServerSession) (bgtask.Owner, error) {
	id, err := s.sessionOwner(ctx, ss)
	if err != nil {
		return bgtask.Owner{}, err
	}
	return s.restoredOwner(ctx, id)
}

// restoredOwner returns the owner id, restoring its records the first time
// the Server sees it (see owner).
func (s *Server) restoredOwner(ctx context.Context, id string) (bgtask.Owner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.restored[id] {
		if _, err := s.m.Restore(ctx, id); err != nil {
			return bgtask.Owner{}, fmt.Errorf("bgmcp: restoring the owner's tasks: %w", err)
		}
		s.restored[id] = true
	}
	return s.m.Owner(id), nil
}
