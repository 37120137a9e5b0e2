package bgmcp

import (
	"context"
	"errors"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
)

// The tasks protocol's input path: a task in input_required is answered by
// the client that waits in tasks/result. The Server sends that client the
// task's question as an elicitation/create request carrying the related
// task in its _meta, on the tasks/result request's own stream, and hands
// the answer to the task as the send_message tool would.

// answerField is the one field of the form an elicitation asks for.
const answerField = "answer"

// answerSchema is the requestedSchema of every elicitation: one string.
var answerSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		answerField: map[string]any{"type": "string", "title": "Answer", "description": "Your answer to the task's question."},
	},
	"required": []string{answerField},
}

// Why a task is cancelled when its client refuses to answer.
const (
	reasonDeclined  = "bgmcp: the client declined the task's input request"
	reasonDismissed = "bgmcp: the client cancelled the task's input request"
)

// canElicit reports whether the session's client declared form
// elicitation (an empty elicitation capability means form).
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// elicitUntilEnd waits until the task is terminal, asking the client each
// question the task asks meanwhile. An accepted answer goes to the task; a
// declined or dismissed question cancels the task with a reason that says
// so. If the client answers an elicitation with an error, or the task runs
// in another instance, it waits for the end without asking (the
// send_message tool still answers a task that runs here). It returns ctx's
// error if ctx ends first.
func (s *Server) elicitUntilEnd(ctx context.Context, ss *mcp.ServerSession, o bgtask.Owner, id string) (bgtype.TaskMeta, error) {
	for {
		m, err := o.WaitSettled(ctx, id)
		if _, failed := errors.AsType[*bgtask.TaskError](err); failed {
			return m, nil // terminal: the record says how it failed
		}
		switch {
		case errors.Is(err, bgtask.ErrNotLive):
			return waitTerminal(ctx, o, id)
		case err != nil:
			return m, err
		case m.Status.IsTerminal():
			return m, nil
		case m.Input == nil || m.Instance != s.m.Instance():
			// Not a request this process can hand an answer to.
			return waitTerminal(ctx, o, id)
		}
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{
			Meta:            mcp.Meta{relatedTaskKey: map[string]any{"taskId": m.ID}},
			Mode:            "form",
			Message:         m.Input.Prompt,
			RequestedSchema: answerSchema,
		})
		switch {
		case ctx.Err() != nil:
			return bgtype.TaskMeta{}, ctx.Err()
		case err != nil:
			return waitTerminal(ctx, o, id)
		case res.Action == "accept":
			// An answer that comes after another one (send_message, or a
			// second tasks/result) finds no open request: the first counts.
			_, err := o.Send(ctx, m.ID, bgtype.Message{From: o.ID(), Content: answerText(res.Content), InReplyTo: m.Input.ID})
			if err != nil && !errors.Is(err, bgtask.ErrNoInputRequest) {
				return waitTerminal(ctx, o, id) // it ended meanwhile, or cannot be answered here
			}
		default:
			reason := reasonDismissed
			if res.Action == "decline" {
				reason = reasonDeclined
			}
			if _, err := o.Cancel(ctx, m.ID, bgtask.WithReason(reason)); err != nil && !errors.Is(err, bgtask.ErrTerminal) {
				return bgtype.TaskMeta{}, err
			}
			// Its request stays open until the task sees its cancel: do not
			// ask it again.
			return waitTerminal(ctx, o, id)
		}
	}
}

// answerText is the answer in an accepted elicitation's content (the SDK
// checked it against answerSchema).
func answerText(content map[string]any) string {
	a, _ := content[answerField].(string)
	return a
}
