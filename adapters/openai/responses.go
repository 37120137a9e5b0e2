package bgopenai

import (
	"context"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
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
			Strict:      param.NewOpt(s.strict),
		}}
	}
	return out
}

// AnswerResponse runs the function_call items of resp's output that name
// one of the Toolset's tools, one after the other in output order, and
// returns a function_call_output item for each, in that order: send them
// as the next request's input (with PreviousResponseID resp.ID, or after
// resp's output items). Calls of other tools, and calls in a namespace, are
// left for the host to answer.
//
// ctx and errors are as for AnswerChat.
func (s *Toolset) AnswerResponse(ctx context.Context, resp *responses.Response) ([]responses.ResponseInputItemUnionParam, error) {
	if resp == nil {
		return nil, nil
	}
	var out []responses.ResponseInputItemUnionParam
	for _, item := range resp.Output {
		if item.Type != "function_call" || item.Namespace != "" {
			continue
		}
		call := item.AsFunctionCall()
		t, ok := s.lookup(call.Name)
		if !ok {
			continue
		}
		text, err := run(ctx, t, call.CallID, call.Arguments)
		if err != nil {
			return nil, err
		}
		out = append(out, responses.ResponseInputItemUnionParam{
			OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: param.NewOpt(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(text)},
			},
		})
	}
	return out, nil
}
