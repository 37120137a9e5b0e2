package bgmcp

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Option configures a Server. NewServer applies the options in order and
// reports the first invalid one.
type Option func(*config)

type config struct {
	err       error // the first invalid option's, reported by NewServer
	ownerFunc func(ctx context.Context, session *mcp.ServerSession) (string, error)
	impl      *mcp.Implementation
	results   resultConfig // WithResultMemory, WithRetainFor
}

func defaultConfig() config {
	return config{
		ownerFunc: sessionOwner,
		impl:      &mcp.Implementation{Name: "bgtask", Version: "v0"},
	}
}

// sessionOwner is the default owner: the MCP session's id, so each session
// has its own tasks.
func sessionOwner(_ context.Context, session *mcp.ServerSession) (string, error) {
	return session.ID(), nil
}

// WithOwnerFunc sets how the owner of a request is found: f is called for
// every tool call and tasks/* request, with the request's ctx (over HTTP it
// carries what the host's authentication middleware put there) and the
// session. An error or a blank id refuses the request. f must be safe for
// concurrent use. Default: one owner per MCP session, named after the
// session id. The owner never comes from a tool's arguments.
func WithOwnerFunc(f func(ctx context.Context, session *mcp.ServerSession) (string, error)) Option {
	return func(c *config) {
		if f == nil {
			c.fail(errors.New("bgmcp: WithOwnerFunc: nil function"))
			return
		}
		c.ownerFunc = f
	}
}

// WithImplementation sets the name and version the server reports in its
// initialize result. Default: name "bgtask", version "v0".
func WithImplementation(impl *mcp.Implementation) Option {
	return func(c *config) {
		if impl == nil {
			c.fail(errors.New("bgmcp: WithImplementation: nil implementation"))
			return
		}
		c.impl = impl
	}
}

// fail records the error of an invalid option; NewServer reports the first.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
