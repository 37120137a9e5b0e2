package bgopenai

import (
	"context"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
)

// ChatTools returns the tools as Chat Completions function tools, for
// ChatCompletionNewParams.Tools, in the Toolset's order.
func (s *Toolset) ChatTools() []openai.ChatCompletionToolUnionParam {
	if s == nil {
		return nil
	}
	out := make([]openai.ChatCompletionToolUnionParam, len(s.tools))
	for i, t := range s.tools {
		out[i] = openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			Parameters:  openai.FunctionParameters(s.params[i]),
			Strict:      param.NewOpt(s.strict),
		})
	}
	return out
}

// AnswerChat runs the function tool calls of msg that name one of the
// Toolset's tools, one after the other in msg's order, and returns a tool
// message for each, in that order: append msg.ToParam() and then these to
// the conversation. Calls of other tools are left for the host to answer.
//
// ctx is every call's ctx: it carries the caller's scope (the run of
// bgtask.WithToolCall, or the current task), and when it ends a wait_task
// call returns. A model's mistake is answered with the error's text; any
// other error, ctx's included, stops at that call and is returned with no
// messages (see the package doc).
func (s *Toolset) AnswerChat(ctx context.Context, msg openai.ChatCompletionMessage) ([]openai.ChatCompletionMessageParamUnion, error) {
	var out []openai.ChatCompletionMessageParamUnion
	for _, call := range msg.ToolCalls {
		if call.Type != "function" {
			continue
		}
		t, ok := s.lookup(call.Function.Name)
		if !ok {
			continue
		}
		text, err := run(ctx, t, call.ID, call.Function.Arguments)
		if err != nil {
			return nil, err
		}
		out = append(out, openai.ToolMessage(text, call.ID))
	}
	return out, nil
}
