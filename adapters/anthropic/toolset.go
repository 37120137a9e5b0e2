package bganthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
)

// Toolset is a list of bgtask tools ready for the Anthropic SDK. Make one
// with New; the zero Toolset has no tools and answers each call as one of
// an unknown tool. It is safe for concurrent use and may be reused for any
// number of requests. A panic
// in a tool's Call is not recovered: it reaches the caller of
// AnswerMessage (from the goroutine of a parallel call, it is raised
// again in the caller's goroutine once the step's other calls have
// returned).
type Toolset struct {
	tools  []agent.Tool
	params []anthropic.ToolUnionParam
	cfg    config
}

// Option configures a Toolset (given to New) or one answer (given to
// AnswerMessage, over the Toolset's own options, for that call only), as
// the SDK's request options do for a client and a request.
type Option func(*config)

type config struct {
	strict *bool
	answer toolcall.Config // WithParallel, WithRunID, WithAgentID, and the host errors' wrap
}

// validate refuses the options' bad values, naming the option.
func (c *config) validate() error { return c.answer.Validate("bganthropic") }

// WithStrict sets the definitions' strict flag, with which the model's
// tool inputs are guaranteed to follow each schema. Default: not sent
// (the API's default, off); bgtask's tool schemas are in the subset strict
// tool use takes. It changes only the definitions (MessageTools): given
// to AnswerMessage, it has no effect.
func WithStrict(strict bool) Option {
	return func(c *config) { c.strict = &strict }
}

// WithParallel lets AnswerMessage run up to n tool_use blocks of one
// message at once (n >= 1; default 1, one after the other in the
// message's order). The tool_result blocks keep the order of the calls
// whatever order the calls end in, so n calls that each wait (a wait_task,
// a bgtask.Owner.Foreground that is promoted at its deadline) take about
// one wait, not n. With n > 1 the calls of one message must not depend on
// each other's effects (a cancel and a list of the same task may run in
// either order). n < 1 is refused with an error matching
// bgtask.ErrInvalidArgument.
func WithParallel(n int) Option {
	return func(c *config) { c.answer.Parallel = n }
}

// WithRunID sets the run id of the lineage AnswerMessage gives each call:
// a task the call spawns records it as Parent.RunID, and cancel_task's
// "self" and child names find the run's tasks. Default: the RunID of the
// bgtask.ToolCall on AnswerMessage's ctx (see bgtask.WithToolCall), if
// any. A blank id is refused with an error matching
// bgtask.ErrInvalidArgument.
func WithRunID(id string) Option {
	return func(c *config) { c.answer.RunID = &id }
}

// WithAgentID sets the agent id of the lineage AnswerMessage gives each
// call (a spawned task's Parent.AgentID). Default: the AgentID of the
// bgtask.ToolCall on AnswerMessage's ctx, if any. A blank id is refused
// with an error matching bgtask.ErrInvalidArgument.
func WithAgentID(id string) Option {
	return func(c *config) { c.answer.AgentID = &id }
}

// New returns a Toolset of tools, usually an Owner's Tools, perhaps with
// tools of the host's own. It fails if a tool's Schema is not a JSON
// object of type "object", two tools have one name, or an option's value
// is bad.
func New(tools []agent.Tool, opts ...Option) (*Toolset, error) {
	cfg := config{answer: defaultAnswer}
	apply(&cfg, opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Toolset{tools: slices.Clone(tools), params: make([]anthropic.ToolUnionParam, len(tools)), cfg: cfg}
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if seen[t.Name] {
			return nil, fmt.Errorf("bganthropic: two tools named %q", t.Name)
		}
		seen[t.Name] = true
		schema, err := inputSchema(t.Schema)
		if err != nil {
			return nil, fmt.Errorf("bganthropic: tool %q: %w", t.Name, err)
		}
		def := &anthropic.ToolParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			InputSchema: schema,
		}
		if cfg.strict != nil {
			def.Strict = param.NewOpt(*cfg.strict)
		}
		s.params[i] = anthropic.ToolUnionParam{OfTool: def}
	}
	return s, nil
}

// apply applies opts to cfg, in order; a nil Option does nothing.
func apply(cfg *config, opts []Option) {
	for _, opt := range opts {
		if opt != nil {
			opt(cfg)
		}
	}
}

// callConfig returns the options of one answer: the Toolset's, then opts.
func (s *Toolset) callConfig(opts []Option) (config, error) {
	cfg := config{answer: defaultAnswer}
	if s != nil && s.cfg.answer.Parallel != 0 { // not the zero Toolset
		cfg = s.cfg
	}
	apply(&cfg, opts)
	return cfg, cfg.validate()
}

// inputSchema splits a JSON Schema into the SDK's fields: properties,
// required, and every other keyword as an extra field, sent as it is.
func inputSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return anthropic.ToolInputSchemaParam{}, errors.New("schema is not a JSON object")
	}
	if string(fields["type"]) != `"object"` {
		return anthropic.ToolInputSchemaParam{}, errors.New(`schema is not of type "object"`)
	}
	var s anthropic.ToolInputSchemaParam
	if p, ok := fields["properties"]; ok {
		s.Properties = p
	}
	if r, ok := fields["required"]; ok {
		if err := json.Unmarshal(r, &s.Required); err != nil {
			return anthropic.ToolInputSchemaParam{}, errors.New(`schema's "required" is not a list of names`)
		}
	}
	extra := maps.Clone(fields)
	for _, k := range []string{"type", "properties", "required"} {
		delete(extra, k)
	}
	if len(extra) > 0 {
		s.ExtraFields = make(map[string]any, len(extra))
		for k, v := range extra {
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// MessageTools returns the tool definitions, for MessageNewParams.Tools,
// in the Toolset's order. Each call returns new definitions: a host may
// set a field of one (say CacheControl on the last) without touching the
// Toolset.
func (s *Toolset) MessageTools() []anthropic.ToolUnionParam {
	if s == nil {
		return nil
	}
	out := make([]anthropic.ToolUnionParam, len(s.params))
	for i, p := range s.params {
		def := *p.OfTool
		out[i] = anthropic.ToolUnionParam{OfTool: &def}
	}
	return out
}

// call is the tool_use id of the tool called name with input: of the
// Toolset's tool, or answered as one of an unknown tool.
func (s *Toolset) call(id, name string, input json.RawMessage) toolcall.Call {
	var tools []agent.Tool
	if s != nil {
		tools = s.tools
	}
	for _, t := range tools {
		if t.Name == name {
			return toolcall.Call{ID: id, Tool: t, Args: input}
		}
	}
	return toolcall.Unknown(id, name, input, tools)
}
