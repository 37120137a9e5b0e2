package bgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/bgtask/bgtask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var errTODO = errors.New("bgmcp: not implemented yet")

// Option configures a Server. Options are applied in order by NewServer.
type Option func(*config) error

type config struct {
	ownerFunc func(ctx context.Context, session *mcp.ServerSession) (string, error)
	impl      *mcp.Implementation
}

// WithOwnerFunc sets how a call's owner is found. Default: one owner per
// MCP session, named after the session id.
func WithOwnerFunc(f func(ctx context.Context, session *mcp.ServerSession) (string, error)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("bgmcp: WithOwnerFunc: nil function")
		}
		c.ownerFunc = f
		return nil
	}
}

// WithImplementation sets the name and version the server reports in
// initialize. Default: name "bgtask", version "v0".
func WithImplementation(impl *mcp.Implementation) Option {
	return func(c *config) error {
		if impl == nil {
			return errors.New("bgmcp: WithImplementation: nil implementation")
		}
		c.impl = impl
		return nil
	}
}

// Tool is a host tool: a Go function plus the JSON Schema of its arguments.
type Tool struct {
	Name, Description string
	InputSchema       json.RawMessage // JSON Schema of the arguments
	TaskSupport       string          // "optional" (default), "required" or "forbidden"
	// Run runs the tool; its result is JSON-encoded as text and
	// structuredContent.
	Run func(ctx context.Context, call *Call) (any, error)
}

// Call is one call of a host tool.
type Call struct {
	Arguments json.RawMessage
}

// Progress reports progress.
func (c *Call) Progress(progress, total float64, message string) {}

// Server serves a Manager over MCP.
type Server struct {
	m   *bgtask.Manager
	cfg config
}

// NewServer returns a Server for m.
func NewServer(m *bgtask.Manager, opts ...Option) (*Server, error) {
	return nil, errTODO
}

// AddTool adds a host tool.
func (s *Server) AddTool(t Tool) error { return errTODO }

// Run serves one session over t until it ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error { return errTODO }

// Handler serves streamable HTTP.
func (s *Server) Handler() http.Handler { return http.NotFoundHandler() }

// StatusOf maps a bgtask status to an MCP task status.
func StatusOf(st bgtask.TaskStatus, isError bool) string { return "" }
