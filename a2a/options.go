package bga2a

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// Defaults of the size caps.
const (
	// DefaultMaxMessageBytes caps the text of a message a client sends (its
	// text parts together), and the text of each status message the server
	// streams (a sub-agent's message, an input prompt, an error, a progress
	// payload). It is bgtask's own default for messages
	// (bgtask.Caps.MaxMessageBytes, 16 KiB).
	DefaultMaxMessageBytes = 16 << 10
	// DefaultMaxParts caps how many parts a client's message may have.
	DefaultMaxParts = 16
	// DefaultMaxArtifactBytes caps the result artifact of a completed task,
	// as JSON text: a result up to this size reaches the client whole.
	DefaultMaxArtifactBytes = 4 << 20
	// DefaultMaxKeptResultBytes caps the memory a server spends on keeping
	// whole the results the Manager's records keep only cut.
	DefaultMaxKeptResultBytes = 64 << 20
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
	maxKept     int
	spawnOpts   []bgtask.SpawnOption
	schemes     a2a.NamedSecuritySchemes
	security    []a2a.SecurityRequirements
}

func defaultConfig() config {
	return config{
		maxMessage:  DefaultMaxMessageBytes,
		maxParts:    DefaultMaxParts,
		maxArtifact: DefaultMaxArtifactBytes,
		maxRequest:  DefaultMaxRequestBytes,
		maxKept:     DefaultMaxKeptResultBytes,
	}
}

// WithOwner makes every request act for the one owner id: a server for a
// single user, or a test. An empty or blank id makes New fail.
func WithOwner(id string) Option {
	return func(c *config) {
		if blank(id) {
			c.fail(fmt.Errorf("bga2a: WithOwner: %w", bgtype.ErrInvalidOwner))
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
// detail but its WWW-Authenticate challenges (see WithSecurityScheme). f is called once per request, on the request's goroutine.
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
// JSON text. A result up to n bytes reaches the client whole, even when the
// Manager's record keeps only a cut copy of it (see WithMaxKeptResultBytes).
// A larger one becomes a text part holding its start, cut with the marker
// "…[truncated: N bytes total]", and the artifact's metadata says
// {"truncated": true, "original_bytes": N} (MetaTruncated,
// MetaOriginalBytes). Default DefaultMaxArtifactBytes; n < 1 makes New fail.
func WithMaxArtifactBytes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxArtifactBytes(%d): must be at least 1", n))
			return
		}
		c.maxArtifact = n
	}
}

// WithMaxKeptResultBytes caps the memory, in bytes of JSON, the server
// spends on results larger than the Manager's Caps.MaxResultBytes: the
// record and the completion event keep only a cut copy of such a result,
// so the server keeps the whole result of each task it started, in memory,
// for the artifact. Past the cap the oldest results are forgotten first; a
// task whose result is forgotten, or that ended before the server started
// (after a restart), shows the record's cut copy, marked as cut as
// WithMaxArtifactBytes says. Default DefaultMaxKeptResultBytes; n < 1
// makes New fail.
func WithMaxKeptResultBytes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.fail(fmt.Errorf("bga2a: WithMaxKeptResultBytes(%d): must be at least 1", n))
			return
		}
		c.maxKept = n
	}
}

// WithMaxRequestBytes caps the body of a JSON-RPC request: a body of n
// bytes is read, a longer one is refused with an invalid-request error
// (-32600) and nothing else is read or done. Default
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

// WithSecurityScheme declares in the agent card a security scheme that the
// host's authentication enforces: the card's securitySchemes gets scheme
// under name, and its security list gets {name: scopes}, one more way a
// client may authenticate (each call adds an alternative). A client reads
// the card (which stays public) and sends the credential the scheme names.
//
// It only describes: the server checks no credential itself. The host
// provides the check, in its own middleware in front of Server.Handler or
// in the function of WithOwnerFunc, which names the owner from the
// verified credential and refuses the rest (HTTP 401). The 401 carries a
// WWW-Authenticate challenge per declared scheme, in order, with the
// card's name as realm: an HTTP scheme's own ("Bearer", "Basic"; a Bearer
// one with scope= the scopes), Bearer for OAuth2 and OpenID Connect,
// APIKey with in= and name= for an API key, none for mutual TLS; with no
// challenge among them, a Bearer one. A blank name, a nil scheme, or a
// name given twice makes New fail.
func WithSecurityScheme(name string, scheme a2a.SecurityScheme, scopes ...string) Option {
	return func(c *config) {
		switch {
		case blank(name):
			c.fail(errors.New("bga2a: WithSecurityScheme: blank scheme name"))
			return
		case scheme == nil:
			c.fail(fmt.Errorf("bga2a: WithSecurityScheme(%q): nil scheme", name))
			return
		}
		n := a2a.SecuritySchemeName(name)
		if _, dup := c.schemes[n]; dup {
			c.fail(fmt.Errorf("bga2a: WithSecurityScheme(%q): scheme declared twice", name))
			return
		}
		if c.schemes == nil {
			c.schemes = make(a2a.NamedSecuritySchemes)
		}
		c.schemes[n] = scheme
		sc := a2a.SecuritySchemeScopes(slices.Clone(scopes))
		if sc == nil {
			sc = a2a.SecuritySchemeScopes{}
		}
		c.security = append(c.security, a2a.SecurityRequirements{n: sc})
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
