package bga2a

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/bgtask/bgtask"
)

// Defaults of the size caps.
const (
	// DefaultMaxMessageBytes caps the text of a message a client sends (its
	// text parts together), and the text of each status message the server
	// streams (a sub-agent's message, an input prompt, an error, a progress
	// payload). It is bgtask's own default for messages.
	DefaultMaxMessageBytes = bgtask.DefaultMaxMessageBytes
	// DefaultMaxParts caps how many parts a client's message may have.
	DefaultMaxParts = 16
	// DefaultMaxArtifactBytes caps the result artifact of a completed task.
	DefaultMaxArtifactBytes = bgtask.DefaultMaxResultBytes
	// DefaultMaxRequestBytes caps the body of a JSON-RPC request.
	DefaultMaxRequestBytes = 1 << 20
)

// Option configures a Server. New applies the options in order and reports
// the first invalid one.
type Option func(*config)

type config struct {
	err         error // the first invalid option's, reported by New
	owner       func(*http.Request) (string, error)
	maxMessage  int
	maxParts    int
	maxArtifact int
	maxRequest  int64
	spawnOpts   []bgtask.SpawnOption
}

func defaultConfig() config {
	return config{
		maxMessage:  DefaultMaxMessageBytes,
		maxParts:    DefaultMaxParts,
		maxArtifact: DefaultMaxArtifactBytes,
		maxRequest:  DefaultMaxRequestBytes,
	}
}

// WithOwner makes every request act for the one owner id: a server for a
// single user, or a test. An empty or blank id makes New fail.
func WithOwner(id string) Option {
	return func(c *config) {
		if blank(id) {
			c.fail(fmt.Errorf("bga2a: WithOwner: %w", bgtask.ErrInvalidOwner))
			return
		}
		c.owner = func(*http.Request) (string, error) { return id, nil }
	}
}

// WithOwnerFunc sets the function that names the owner of an HTTP request,
// from its authentication (a verified token, a session, a client
// certificate). It is never read from the message: a client acts for the
// owner its request authenticates as, and sees only that owner's tasks.
// An error or a blank owner refuses the request with HTTP 401 and no
// detail. f is called once per request, on the request's goroutine.
func WithOwnerFunc(f func(r *http.Request) (string, error)) Option {
	return func(c *config) {
		if f == nil {
			c.fail(errors.New("bga2a: WithOwnerFunc: nil function"))
			return
		}
		c.owner = f
	}
}

// WithMaxMessageBytes caps the text of a client's message (a longer one is
// refused with an invalid-params error, nothing started or sent) and of each
// status message the server sends (cut, with a marker that gives the
// original size). Default DefaultMaxMessageBytes; n < 1 makes New fail.
func WithMaxMessageBytes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxMessageBytes(%d): must be at least 1", n))
			return
		}
		c.maxMessage = n
	}
}

// WithMaxParts caps how many parts a client's message may have; more are
// refused with an invalid-params error. Default DefaultMaxParts; n < 1 makes
// New fail.
func WithMaxParts(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxParts(%d): must be at least 1", n))
			return
		}
		c.maxParts = n
	}
}

// WithMaxArtifactBytes caps the result artifact of a completed task, as
// text or JSON: a larger one becomes a text part cut with a marker that gives
// the original size. The Manager's WithMaxResultBytes caps the record
// already; this cap is for what crosses the wire. Default
// DefaultMaxArtifactBytes; n < 1 makes New fail.
func WithMaxArtifactBytes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxArtifactBytes(%d): must be at least 1", n))
			return
		}
		c.maxArtifact = n
	}
}

// WithMaxRequestBytes caps the body of a JSON-RPC request: a larger one is
// refused with a parse error before anything else is read. Default
// DefaultMaxRequestBytes; n < 1 makes New fail.
func WithMaxRequestBytes(n int64) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxRequestBytes(%d): must be at least 1", n))
			return
		}
		c.maxRequest = n
	}
}

// WithSpawnOptions adds options to every spawn of the sub-agent (a type, a
// description; not a name, which must be unique among the owner's live
// tasks). The server sets the wake policy itself: every event of the
// sub-agent is streamed.
func WithSpawnOptions(opts ...bgtask.SpawnOption) Option {
	return func(c *config) {
		c.spawnOpts = append(c.spawnOpts, opts...)
	}
}

func blank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

// fail records the error of an invalid option; New reports the first.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
