package bgopenai

import (
	"context"
	"encoding/json"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
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
			Strict:      param.NewOpt(s.cfg.strict),
		})
	}
	return out
}

// AnswerChat runs the function tool calls of msg and returns a tool
// message for each, in msg's order: append msg.ToParam() and then these
// to the conversation (then the Plugin's messages, see ChatPrompt). A call
// of a tool the Toolset does not have (a name the model made up) is
// answered with an error that names the Toolset's tools, as a model's
// mistake; calls of another type than function (custom tools the host
// declared itself) are left for the host to answer. The calls run one
// after the other unless WithParallel allows more; opts apply to this call
// only, over the Toolset's.
//
// Each call runs with ctx carrying its own bgtask.ToolCall: the run and
// agent ids of WithRunID and WithAgentID (or of the bgtask.ToolCall on
// ctx), and the call's id, so a task it spawns records them in its Parent.
// ctx also carries the caller's scope (the current task, for a sub-agent),
// and when it ends a wait_task call returns.
//
// Every call gets its tool message, even when AnswerChat returns an error:
// a model's mistake (see IsModelMistake) is answered with the error's
// text, for the model to correct; a call that fails with any other error
// (bgtask.ErrClosed, a store's error, ctx's) is answered "tool call failed: the
// host could not run it" and the calls not started yet "tool call not
// run: another call of this step failed", and the errors are returned
// (joined, each naming its tool and call), for the host to end its turn
// (see the package doc). A bad option is returned with no messages and
// runs nothing.
func (s *Toolset) AnswerChat(ctx context.Context, msg openai.ChatCompletionMessage, opts ...Option) ([]openai.ChatCompletionMessageParamUnion, error) {
	var calls []toolcall.Call
	for _, call := range msg.ToolCalls {
		if call.Type != "function" {
			continue
		}
		calls = append(calls, s.call(call.ID, call.Function.Name, json.RawMessage(call.Function.Arguments)))
	}
	outs, err := s.answer(ctx, calls, opts)
	if outs == nil {
		return nil, err
	}
	answers := make([]openai.ChatCompletionMessageParamUnion, len(outs))
	for i, o := range outs {
		answers[i] = openai.ToolMessage(o.Text, calls[i].ID)
	}
	return answers, err
}

// ChatPrompt returns msgs, the Plugin's messages (from Deliver or
// BeforeInference), as Chat Completions messages, in order: the Plugin's
// own instructions (Role "system", rendering no event) as system
// messages, and everything else (events, a task's or another agent's
// messages, the list of running tasks) as user messages, whatever its
// Role says, since tasks wrote their text. Messages with no content are
// left out. Append them after the step's tool messages (a tool message
// must follow the assistant message that called it). Keep in the
// conversation only the messages that are not Ephemeral: the ephemeral
// ones (the instructions and the task list) are for the next request only.
func ChatPrompt(msgs []agent.PromptMessage) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Content == "":
		case instructions(m):
			out = append(out, openai.SystemMessage(m.Content))
		default:
			out = append(out, openai.UserMessage(m.Content))
		}
	}
	return out
}

// instructions reports whether m is the Plugin's own instructions, the
// only text that may go in the system role: the Plugin gives them as a
// system message that renders no event.
func instructions(m agent.PromptMessage) bool {
	return m.Role == "system" && m.Event == nil && m.From == ""
}
