package bgopenai

import (
	"context"
	"encoding/json"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
)

// ResponseTools returns the tools as Responses function tools, for
// ResponseNewParams.Tools, in the Toolset's order.
func (s *Toolset) ResponseTools() []responses.ToolUnionParam {
	if s == nil {
		return nil
	}
	out := make([]responses.ToolUnionParam, len(s.tools))
	for i, t := range s.tools {
		out[i] = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			Parameters:  s.params[i],
			Strict:      param.NewOpt(s.cfg.strict),
		}}
	}
	return out
}

// AnswerResponse runs the function_call items of resp's output and
// returns a function_call_output item for each, in output order: send
// them as the next request's input (with PreviousResponseID resp.ID, or
// after resp's output items), followed by the Plugin's messages (see
// ResponsePrompt). A call of a tool the Toolset does not have is answered
// with an error that names the Toolset's tools, as in AnswerChat; calls in
// a namespace (the host's own) are left for the host to answer.
//
// Options, lineage, ctx and errors are as for AnswerChat: every call gets
// its output item, even when AnswerResponse returns an error.
func (s *Toolset) AnswerResponse(ctx context.Context, resp *responses.Response, opts ...Option) ([]responses.ResponseInputItemUnionParam, error) {
	var calls []toolcall.Call
	if resp != nil {
		for _, item := range resp.Output {
			if item.Type != "function_call" || item.Namespace != "" {
				continue
			}
			call := item.AsFunctionCall()
			calls = append(calls, s.call(call.CallID, call.Name, json.RawMessage(call.Arguments)))
		}
	}
	outs, err := s.answer(ctx, calls, opts)
	if outs == nil {
		return nil, err
	}
	items := make([]responses.ResponseInputItemUnionParam, len(outs))
	for i, o := range outs {
		items[i] = responses.ResponseInputItemUnionParam{
			OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: param.NewOpt(calls[i].ID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(o.Text)},
			},
		}
	}
	return items, err
}

// ResponsePrompt returns msgs, the Plugin's messages, as Responses input
// messages, in order: the Plugin's own instructions as system messages,
// everything else as user messages (see ChatPrompt, whose rules it
// follows).
func ResponsePrompt(msgs []agent.PromptMessage) []responses.ResponseInputItemUnionParam {
	out := make([]responses.ResponseInputItemUnionParam, 0, len(msgs))
	for _, m := range msgs {
		if m.Content == "" {
			continue
		}
		role := responses.EasyInputMessageRoleUser
		if instructions(m) {
			role = responses.EasyInputMessageRoleSystem
		}
		out = append(out, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
			Type:    responses.EasyInputMessageTypeMessage,
			Role:    role,
			Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(m.Content)},
		}})
	}
	return out
}
