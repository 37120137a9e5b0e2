package bgopenai

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
)

// Toolset is a list of bgtask tools ready for the OpenAI SDK. Make one with
// New; the zero Toolset has no tools and answers each call as one of an
// unknown tool. It is safe for concurrent use and may be reused for any
// number of requests. A panic in a tool's Call is not recovered: it
// reaches the caller of the Answer method (from the goroutine of a
// parallel call, it is raised again in the caller's goroutine once the
// step's other calls have returned).
type Toolset struct {
	tools  []agent.Tool
	params []map[string]any // each tool's Schema, decoded once
	cfg    config
}

// Option configures a Toolset (given to New) or one answer (given to
// AnswerChat or AnswerResponse, over the Toolset's own options, for that
// call only), as the SDK's request options do for a client and a request.
type Option func(*config)

type config struct {
	strict bool
	answer toolcall.Config // WithParallel, WithRunID, WithAgentID, and the host errors' wrap
}

// validate refuses the options' bad values, naming the option.
func (c *config) validate() error { return c.answer.Validate("bgopenai") }

// WithStrict sets the definitions' strict flag, with which OpenAI's models
// follow each schema exactly. Default: on, since bgtask's tool schemas are
// in strict mode's subset (every property required, optional ones
// nullable, every object closed); turn it off for tools of your own whose
// schemas are not. It changes only the definitions (ChatTools,
// ResponseTools): given to an Answer method, it has no effect.
func WithStrict(strict bool) Option {
	return func(c *config) { c.strict = strict }
}

// WithParallel lets the Answer methods run up to n tool calls of one reply
// at once (n >= 1; default 1, one after the other in the reply's order).
// The answers keep the order of the calls whatever order the calls end in,
// so n calls that each wait (a wait_task, a bgtask.Owner.Foreground that
// is promoted at its deadline) take about one wait, not n. With n > 1 the
// calls of one reply must not depend on each other's effects (a cancel and
// a list of the same task may run in either order). n < 1 is refused
// with an error matching bgtask.ErrInvalidArgument.
func WithParallel(n int) Option {
	return func(c *config) { c.answer.Parallel = n }
}

// WithRunID sets the run id of the lineage the Answer methods give each
// call: a task the call spawns records it as Parent.RunID, and
// cancel_task's "self" and child names find the run's tasks. Default: the
// RunID of the bgtask.ToolCall on the Answer method's ctx (see
// bgtask.WithToolCall), if any. A blank id is refused with an error
// matching bgtask.ErrInvalidArgument.
func WithRunID(id string) Option {
	return func(c *config) { c.answer.RunID = &id }
}

// WithAgentID sets the agent id of the lineage the Answer methods give each
// call (a spawned task's Parent.AgentID). Default: the AgentID of the
// bgtask.ToolCall on the Answer method's ctx, if any. A blank id is
// refused with an error matching bgtask.ErrInvalidArgument.
func WithAgentID(id string) Option {
	return func(c *config) { c.answer.AgentID = &id }
}

// New returns a Toolset of tools, usually an Owner's Tools, perhaps with
// tools of the host's own. It fails if a tool's Schema is not a JSON
// object, two tools have one name, or an option's value is bad.
func New(tools []agent.Tool, opts ...Option) (*Toolset, error) {
	cfg := config{strict: true, answer: defaultAnswer}
	apply(&cfg, opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Toolset{tools: slices.Clone(tools), params: make([]map[string]any, len(tools)), cfg: cfg}
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if seen[t.Name] {
			return nil, fmt.Errorf("bgopenai: two tools named %q", t.Name)
		}
		seen[t.Name] = true
		if err := json.Unmarshal(t.Schema, &s.params[i]); err != nil || s.params[i] == nil {
			return nil, fmt.Errorf("bgopenai: tool %q: schema is not a JSON object", t.Name)
		}
	}
	return s, nil
}

// call is the call id of the tool called name with args: of the
// Toolset's tool, or answered as one of an unknown tool.
func (s *Toolset) call(id, name string, args json.RawMessage) toolcall.Call {
	var tools []agent.Tool
	if s != nil {
		tools = s.tools
	}
	for _, t := range tools {
		if t.Name == name {
			return toolcall.Call{ID: id, Tool: t, Args: args}
		}
	}
	return toolcall.Unknown(id, name, args, tools)
}

// callConfig returns the options of one answer: the Toolset's, then opts.
func (s *Toolset) callConfig(opts []Option) (config, error) {
	cfg := config{strict: true, answer: defaultAnswer}
	if s != nil && s.cfg.answer.Parallel != 0 { // not the zero Toolset
		cfg = s.cfg
	}
	apply(&cfg, opts)
	return cfg, cfg.validate()
}

// apply applies opts to cfg, in order; a nil Option does nothing.
func apply(cfg *config, opts []Option) {
	for _, opt := range opts {
		if opt != nil {
			opt(cfg)
		}
	}
}
