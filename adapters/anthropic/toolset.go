package bganthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"
	"github.com/bgtask/bgtask"
)

// Toolset is a list of bgtask tools ready for the Anthropic SDK. Make one
// with New; the zero Toolset has no tools and answers no call. It is safe
// for concurrent use and may be reused for any number of requests. A panic
// in a tool's Call is not recovered (bgtask's own tools do not panic).
type Toolset struct {
	tools  []bgtask.Tool
	params []anthropic.ToolUnionParam
}

// New returns a Toolset of tools, usually an Owner's Tools. It fails if a
// tool's Schema is not a JSON object of type "object" or two tools have one
// name.
func New(tools []bgtask.Tool) (*Toolset, error) {
	s := &Toolset{tools: slices.Clone(tools), params: make([]anthropic.ToolUnionParam, len(tools))}
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
		s.params[i] = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			InputSchema: schema,
		}}
	}
	return s, nil
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

// Tools returns the tool definitions, for MessageNewParams.Tools, in the
// Toolset's order. Each call returns new definitions: a host may set a
// field of one (say CacheControl on the last) without touching the
// Toolset.
func (s *Toolset) Tools() []anthropic.ToolUnionParam {
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

// Answer runs the tool_use blocks of msg that name one of the Toolset's
// tools, one after the other in msg's order, and returns a tool_result
// block for each, in that order: append msg.ToParam() and then
// anthropic.NewUserMessage with these blocks (and the host's own results)
// to the conversation. tool_use blocks of other tools, or of a toolset,
// are left for the host to answer.
//
// ctx is every call's ctx: it carries the caller's scope (the run of
// bgtask.WithToolCall, or the current task), and when it ends a wait_task
// call returns. A model's mistake is answered with is_error set and the
// error's text; any other error, ctx's included, stops at that call and is
// returned with no blocks (see the package doc).
func (s *Toolset) Answer(ctx context.Context, msg *anthropic.Message) ([]anthropic.ContentBlockParamUnion, error) {
	if msg == nil {
		return nil, nil
	}
	var out []anthropic.ContentBlockParamUnion
	for _, block := range msg.Content {
		if block.Type != "tool_use" || block.ToolsetName != "" {
			continue
		}
		t, ok := s.lookup(block.Name)
		if !ok {
			continue
		}
		res, err := t.Call(ctx, block.Input)
		switch {
		case err == nil:
			out = append(out, anthropic.NewToolResultBlock(block.ID, string(res), false))
		case bgtask.IsModelMistake(err):
			out = append(out, anthropic.NewToolResultBlock(block.ID, err.Error(), true))
		default:
			return nil, fmt.Errorf("bganthropic: %s (tool_use %s): %w", t.Name, block.ID, err)
		}
	}
	return out, nil
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
