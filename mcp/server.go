package bgmcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/bgtask/bgtask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolVersion is the newest MCP revision served: the one whose tasks
// protocol the Server speaks.
const ProtocolVersion = "2025-11-25"

// ErrNoOwner refuses a request whose owner could not be found: the owner
// function returned an error (wrapped with it) or a blank id.
var ErrNoOwner = errors.New("bgmcp: no owner for this request")

// Server serves one Manager over MCP: the five model-facing task tools of
// bgtask, the host's own tools (AddTool), and the tasks protocol for them.
// Every request acts for one owner (see WithOwnerFunc) and sees that
// owner's tasks only.
//
// A Server is safe for concurrent use and serves any number of sessions.
// It has no zero value: use NewServer. Tasks outlive the session that
// started them; the Manager's Shutdown ends them.
type Server struct {
	m       *bgtask.Manager
	cfg     config
	sdk     *mcp.Server
	handler http.Handler
	whole   *wholeResults // the whole results that task records hold cut

	mu       sync.Mutex
	tools    map[string]*hostTool // the host's tools, by name
	restored map[string]bool      // owners Restore has run for
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
		whole:    newWholeResults(cfg.results.budget()),
	}
	// The tasks protocol is that of 2025-11-25: later revisions are not
	// offered.
	versions := slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v > ProtocolVersion })
	s.sdk = mcp.NewServer(cfg.impl, &mcp.ServerOptions{HasTools: true, SupportedProtocolVersions: versions})
	for _, t := range m.Owner("schema").Tools() {
		s.sdk.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema}, s.taskTool(t.Name))
	}
	if err := s.addTaskMethods(); err != nil {
		return nil, err
	}
	s.sdk.AddReceivingMiddleware(s.middleware)
	sdkHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk }, nil)
	s.handler = taskBodyHandler(sdkHandler)
	return s, nil
}

// Run serves one session over t (for example &mcp.StdioTransport{}) until
// the client ends it or ctx ends, and returns why. The session's tasks go
// on running after it ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.sdk.Run(ctx, &taskTransport{inner: t})
}

// Handler returns the streamable HTTP handler serving this Server: one
// session per client, as the MCP streamable HTTP transport defines. The
// same handler is returned on every call. Mount it behind the host's
// authentication and read the caller in WithOwnerFunc.
func (s *Server) Handler() http.Handler { return s.handler }

// owner finds the owner of a request. The first time the Server sees an
// owner it restores the owner's records: a task that a stopped process ran
// becomes interrupted (failed to the client).
func (s *Server) owner(ctx context.Context, ss *mcp.ServerSession) (bgtask.Owner, error) {
	id, err := s.cfg.ownerFunc(ctx, ss)
	if err != nil {
		return bgtask.Owner{}, fmt.Errorf("%w: %w", ErrNoOwner, err)
	}
	if strings.TrimSpace(id) == "" {
		return bgtask.Owner{}, ErrNoOwner
	}
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
