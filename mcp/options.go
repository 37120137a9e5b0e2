package bgmcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the streamable HTTP handler, unless options change them.
const (
	// DefaultSessionTimeout is how long an HTTP session may stay idle (no
	// request from its client) before it ends.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultMaxSessions is how many HTTP sessions may be open at once.
	DefaultMaxSessions = 10000
	// DefaultMaxBodyBytes is the largest HTTP request body read, in bytes.
	DefaultMaxBodyBytes = 4 << 20
)

// Option configures a Server. NewServer applies the options in order and
// reports the first invalid one.
type Option func(*config)

type config struct {
	err       error // the first invalid option's, reported by NewServer
	ownerFunc func(ctx context.Context, session *mcp.ServerSession) (string, error)
	impl      *mcp.Implementation

	sdk            *mcp.Server    // WithSDKServer; nil: the Server makes its own
	eventStore     mcp.EventStore // WithEventStore; nil: no resumption
	sessionTimeout time.Duration  // idle HTTP sessions end after it
	maxSessions    int            // open HTTP sessions at most
	maxBody        int64          // largest HTTP request body, in bytes
	results        resultConfig   // WithResultMemory, WithRetainFor
}

func defaultConfig() config {
	return config{
		ownerFunc: sessionOwner,
		impl:      &mcp.Implementation{Name: "bgtask", Version: "v0"},

		sessionTimeout: DefaultSessionTimeout,
		maxSessions:    DefaultMaxSessions,
		maxBody:        DefaultMaxBodyBytes,
	}
}

// sessionOwner is the default owner: the MCP session's id, so each session
// has its own tasks.
func sessionOwner(_ context.Context, session *mcp.ServerSession) (string, error) {
	return session.ID(), nil
}

// WithOwnerFunc sets how the owner of a request is found. A session acts
// for one owner: the first one f names for it. Over streamable HTTP, f is
// called with the ctx of each HTTP request (it carries what the host's
// authentication middleware put there) and the session: for the request
// that opens the session, which names the session's owner (if f names none
// then, the next request that has one does), and again for every later
// request of that session (POST, GET or DELETE), which is refused with 403
// Forbidden and ErrNotSessionOwner's text unless f names the same owner. So a caller who holds another caller's Mcp-Session-Id
// reaches nothing of that session. Over Run (stdio, in-memory) f is called
// with Run's ctx until it names an owner.
//
// The host must therefore put the caller's identity on every HTTP
// request's ctx (its authentication middleware, in front of Handler), and
// f must read it from there, never from the session or a tool's arguments.
// An error or a blank id refuses the request (ErrNoOwner). f must be safe
// for concurrent use and quick: it runs on every HTTP request. Default: one
// owner per MCP session, named after the session id (then the session id
// is the only credential: use WithOwnerFunc whenever callers are
// authenticated).
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

// WithSessionTimeout sets how long a streamable HTTP session may stay idle
// before the Server ends it: none of its client's HTTP requests in flight
// for d. A POST that runs (a tasks/result that waits) and an open GET
// stream (where a task's progress goes) keep it open. The session's tasks
// go on; its client must open a new session, and with the default owner
// (one per session) it no longer reaches them. d must be positive.
// Default: DefaultSessionTimeout. Run's sessions end with their transport;
// 2026-07-28 has no sessions.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("bgmcp: WithSessionTimeout: %v is not positive", d))
			return
		}
		c.sessionTimeout = d
	}
}

// WithMaxSessions caps the number of open streamable HTTP sessions: a
// request that would open one more is refused with 503 Service
// Unavailable and ErrTooManySessions's text, until a session ends (its
// client deletes it, or it times out). n must be positive. Default:
// DefaultMaxSessions.
func WithMaxSessions(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.fail(fmt.Errorf("bgmcp: WithMaxSessions: %d is not positive", n))
			return
		}
		c.maxSessions = n
	}
}

// WithMaxBodyBytes caps the body of a streamable HTTP request, in bytes: a
// longer body is refused with 413 Request Entity Too Large and nothing of
// it is handled. n must be positive. Default: DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			c.fail(fmt.Errorf("bgmcp: WithMaxBodyBytes: %d is not positive", n))
			return
		}
		c.maxBody = n
	}
}

// fail records the error of an invalid option; NewServer reports the first.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithSDKServer makes the Server serve through the host's own SDK server
// instead of one of its own, so that the host serves its resources,
// prompts, completions, logging, its own SDK tools and whatever else the
// SDK offers beside bgtask's tools and tasks, from the same endpoint. NewServer adds to
// srv the five task tools, the tasks methods (tasks/get, tasks/list,
// tasks/result, tasks/cancel, tasks/update) and a receiving middleware, so
// srv must have none of those names yet; AddTool adds to it too. srv's
// options hold (its capabilities, page size, handlers), and so do the
// protocol revisions it allows: 2026-07-28 needs it in
// ServerOptions.SupportedProtocolVersions when that is set. The host must
// serve srv only through this Server (Handler or Run): otherwise its
// requests escape the owner checks and the session caps. A tool the host
// adds to srv itself runs in the foreground only: a 2025-11-25 task request
// for it is refused as for an unknown tool (-32602), and on 2026-07-28 it
// never runs as a task. Default: the Server makes its own SDK server, with the name of
// WithImplementation.
func WithSDKServer(srv *mcp.Server) Option {
	return func(c *config) {
		if srv == nil {
			c.fail(errors.New("bgmcp: WithSDKServer: nil server"))
			return
		}
		c.sdk = srv
	}
}

// WithEventStore lets a 2025-11-25 client resume an interrupted stream
// over streamable HTTP: every message of a session's streams is kept in
// store, and a GET with Last-Event-ID replays the ones after it (see
// mcp.EventStore; mcp.NewMemoryEventStore keeps them in memory, up to its
// MaxBytes). The 2026-07-28 revision has no resumption. Default: none (a
// broken stream's messages are lost; a client polls tasks/get instead).
func WithEventStore(store mcp.EventStore) Option {
	return func(c *config) {
		if store == nil {
			c.fail(errors.New("bgmcp: WithEventStore: nil store"))
			return
		}
		c.eventStore = store
	}
}
