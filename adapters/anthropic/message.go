package bganthropic

import (
	"context"
	"slices"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/toolcall"
)

// AnswerMessage runs the tool_use blocks of msg and returns a tool_result
// block for each, in msg's order: append msg.ToParam() to the
// conversation, then these blocks in the next user message, before any
// other block of it (AppendUserTurn does this). A tool_use of a tool the
// Toolset does not have (a name the model made up) is answered with
// is_error and a text that names the Toolset's tools, as a model's
// mistake; tool_use blocks of a toolset (the host's own) are left for the
// host to answer (in the same user message). The calls run one after the
// other unless WithParallel allows more; opts apply to this call only,
// over the Toolset's.
//
// Each call runs with ctx carrying its own bgtask.ToolCall: the run and
// agent ids of WithRunID and WithAgentID (or of the bgtask.ToolCall on
// ctx), and the tool_use block's id, so a task it spawns records them in
// its Parent. ctx also carries the caller's scope (the current task, for
// a sub-agent), and when it ends a wait_task call returns.
//
// Every call gets its tool_result, even when AnswerMessage returns an
// error: a model's mistake (see IsModelMistake) is answered with
// is_error set and the error's text, for the model to correct; a call
// that fails with any other error (bgtask.ErrClosed, a store's error,
// ctx's) is answered "tool call failed: the host could not run it" and the
// calls not started yet "tool call not run: another call of this step
// failed", both with is_error, and the errors are returned (joined, each
// naming its tool and tool_use id), for the host to end its turn (see the
// package doc). A bad option is returned with no blocks and runs nothing.
func (s *Toolset) AnswerMessage(ctx context.Context, msg *anthropic.Message, opts ...Option) ([]anthropic.ContentBlockParamUnion, error) {
	var calls []toolcall.Call
	if msg != nil {
		for _, block := range msg.Content {
			if block.Type != "tool_use" || block.ToolsetName != "" {
				continue
			}
			calls = append(calls, s.call(block.ID, block.Name, block.Input))
		}
	}
	outs, err := s.answer(ctx, calls, opts)
	if outs == nil {
		return nil, err
	}
	blocks := make([]anthropic.ContentBlockParamUnion, len(outs))
	for i, o := range outs {
		blocks[i] = anthropic.NewToolResultBlock(calls[i].ID, o.Text, o.IsError)
	}
	return blocks, err
}

// MessagePrompt splits msgs, the Plugin's messages (from Deliver or
// BeforeInference), for a Messages request, in order: the Plugin's own
// instructions (Role "system", rendering no event) as system blocks, for
// MessageNewParams.System after the host's own; everything else (events,
// a task's or another agent's messages, the list of running tasks) as text
// blocks of the user turn, whatever its Role says, since tasks wrote
// their text. Messages with no content are left out (the API refuses
// empty text). Add the user blocks with AppendUserTurn, so they join the
// step's tool_result blocks in one user message. Keep in the
// conversation only what comes of messages that are not Ephemeral: the
// ephemeral ones (the instructions and the task list) are for the next
// request only.
func MessagePrompt(msgs []agent.PromptMessage) (system []anthropic.TextBlockParam, user []anthropic.ContentBlockParamUnion) {
	for _, m := range msgs {
		switch {
		case m.Content == "":
		case m.Role == "system" && m.Event == nil && m.From == "":
			system = append(system, anthropic.TextBlockParam{Text: m.Content})
		default:
			user = append(user, anthropic.NewTextBlock(m.Content))
		}
	}
	return system, user
}

// AppendUserTurn returns messages with blocks added to the user turn that
// ends it, as the API wants a conversation: roles alternate, so when the
// last message is the user's the blocks join it, and otherwise they make
// a new user message. In that message the tool_result blocks come first,
// in their order, then the other blocks in theirs, as a user message
// answering tool_use blocks must start with their results. messages
// itself is never changed (the result has its own array and its own last
// message), so a host can add a request's ephemeral blocks to its kept
// conversation without keeping them. With no blocks it returns messages.
func AppendUserTurn(messages []anthropic.MessageParam, blocks ...anthropic.ContentBlockParamUnion) []anthropic.MessageParam {
	if len(blocks) == 0 {
		return messages
	}
	n := len(messages)
	var content []anthropic.ContentBlockParamUnion
	if n > 0 && messages[n-1].Role == anthropic.MessageParamRoleUser {
		content = slices.Concat(messages[n-1].Content, blocks)
		n--
	} else {
		content = slices.Clone(blocks)
	}
	slices.SortStableFunc(content, func(a, b anthropic.ContentBlockParamUnion) int {
		switch ra, rb := a.OfToolResult != nil, b.OfToolResult != nil; {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	return append(messages[:n:n], anthropic.NewUserMessage(content...))
}
