package bgopenai

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask"
)

// Toolset is a list of bgtask tools ready for the OpenAI SDK. Make one with
// New; the zero Toolset has no tools and answers no call. It is safe for
// concurrent use and may be reused for any number of requests. A panic in
// a tool's Call is not recovered (bgtask's own tools do not panic).
type Toolset struct {
	tools  []bgtask.Tool
	params []map[string]any // each tool's Schema, decoded once
	strict bool
}

// Option configures New.
type Option func(*config)

type config struct {
	strict bool
}

// WithStrict sets the definitions' strict flag, with which OpenAI's models
// follow each schema exactly. Default: on, since bgtask's tool schemas are
// in strict mode's subset (every property required, optional ones
// nullable, every object closed); turn it off for tools of your own whose
// schemas are not.
func WithStrict(strict bool) Option {
	return func(c *config) { c.strict = strict }
}

// New returns a Toolset of tools, usually an Owner's Tools. It fails if a
// tool's Schema is not a JSON object or two tools have one name.
func New(tools []bgtask.Tool, opts ...Option) (*Toolset, error) {
	cfg := config{strict: true}
	for _, opt := range opts {
		opt(&cfg)
	}
	s := &Toolset{tools: slices.Clone(tools), params: make([]map[string]any, len(tools)), strict: cfg.strict}
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

// lookup returns the tool called name, if the Toolset has it.
func (s *Toolset) lookup(name string) (bgtask.Tool, bool) {
	if s == nil {
		return bgtask.Tool{}, false
	}
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return bgtask.Tool{}, false
}

// run calls t with the model's arguments and returns the text the model
// gets back: the result, or the error's text when the error is the model's
// own mistake. Any other error is returned, naming the tool and the call.
func run(ctx context.Context, t bgtask.Tool, callID, args string) (string, error) {
	res, err := t.Call(ctx, json.RawMessage(args))
	switch {
	case err == nil:
		return string(res), nil
	case bgtask.IsModelMistake(err):
		return err.Error(), nil
	}
	return "", fmt.Errorf("bgopenai: %s (call %s): %w", t.Name, callID, err)
}
