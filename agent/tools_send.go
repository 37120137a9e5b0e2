package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// sendMessageSchema: "to.name" is required with relation "child" and
// refused with "parent", and so is "in_reply_to" with "parent"; the decoder
// says so (strict mode has no oneOf, no if/then).
var sendMessageSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"to":{"type":"object","properties":{` +
	`"relation":{"type":"string","enum":["child","parent"],"description":"child: one of your tasks, by name; parent: the agent that started the current task."},` +
	`"name":` + textSchema(argTextMax, true, `With relation "child": the task's name or task_id; null with "parent".`) + `},` +
	`"required":["relation","name"],"additionalProperties":false},` +
	`"message":` + textSchema(argMessageMax, false, "The message text.") + `,` +
	`"in_reply_to":` + textSchema(argTextMax, true, `With relation "child": the id of the task's input request (input_...) this message answers, or null; null with "parent".`) + `},` +
	`"required":["to","message","in_reply_to"],"additionalProperties":false}`)

// sendReceipt is send_message's result.
type sendReceipt struct {
	Status    string `json:"status"` // "delivered" or "failed"
	MessageID string `json:"message_id,omitempty"`
	Error     string `json:"error,omitempty"`   // "recipient_not_found", "recipient_unavailable", "no_input_request", "recipient_ambiguous"
	Message   string `json:"message,omitempty"` // recipient_ambiguous: the tasks of that name
}

func (o owner) sendMessageTool() Tool {
	return Tool{
		Name: "send_message",
		Description: "Send a message to one of your running sub-agents (relation \"child\", by name or task_id), " +
			"or, from inside a background task, to the agent that started it (relation \"parent\"). " +
			"To answer a task that is awaiting_input, send to it with in_reply_to set to its input request id; " +
			"that works for any task, and the task then runs again.",
		Schema: sendMessageSchema,
		Call: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
			args, err := decodeSendArgs(raw)
			if err != nil {
				return nil, err
			}
			if o.Closed() {
				return nil, bgtask.ErrClosed
			}
			s := o.scope(ctx)
			var r sendReceipt
			if args.To.Relation == relParent {
				r, err = o.sendToParent(ctx, s, args.Message)
			} else {
				r, err = o.sendToChild(ctx, s, args)
			}
			if err != nil {
				return nil, err
			}
			return toolJSON(r)
		},
	}
}

func sendFailed(code string) sendReceipt { return sendReceipt{Status: "failed", Error: code} }

// sendToParent makes the current task send a message to its owner.
func (o owner) sendToParent(ctx context.Context, s toolScope, content string) (sendReceipt, error) {
	if s.task == nil {
		return sendFailed("recipient_unavailable"), nil
	}
	id, err := s.task.SendToOwner(ctx, content)
	switch {
	case errors.Is(err, bgtask.ErrTerminal), errors.Is(err, bgtask.ErrInboxClosed): // ErrInboxClosed: no fallback took it
		return sendFailed("recipient_unavailable"), nil
	case err != nil:
		return sendReceipt{}, err
	}
	return sendReceipt{Status: "delivered", MessageID: id}, nil
}

// sendToChild delivers to one of the owner's non-terminal tasks, by id then
// by name.
func (o owner) sendToChild(ctx context.Context, s toolScope, args sendArgs) (sendReceipt, error) {
	id, err := o.findLive(ctx, args.To.Name)
	var amb *ambiguousNameError
	switch {
	case errors.As(err, &amb):
		return sendReceipt{Status: "failed", Error: "recipient_ambiguous", Message: amb.message()}, nil
	case err != nil:
		return sendReceipt{}, err
	case id == "":
		return sendFailed("recipient_not_found"), nil
	}
	msgID, err := o.Send(ctx, id, bgtype.Message{From: s.sender(o.ID()), Content: args.Message, InReplyTo: args.InReplyTo})
	switch {
	case err == nil:
		return sendReceipt{Status: "delivered", MessageID: msgID}, nil
	case errors.Is(err, bgtask.ErrNotFound), errors.Is(err, bgtask.ErrTerminal):
		return sendFailed("recipient_not_found"), nil // ended since it was found
	case errors.Is(err, bgtask.ErrNotSubAgent), errors.Is(err, bgtask.ErrInboxClosed):
		return sendFailed("recipient_unavailable"), nil
	case errors.Is(err, bgtask.ErrNoInputRequest):
		return sendFailed("no_input_request"), nil
	}
	return sendReceipt{}, err
}

// findLive returns the id of the owner's non-terminal task whose id, else
// whose name, is name (findNamed); "" if there is none.
func (o owner) findLive(ctx context.Context, name string) (string, error) {
	meta, found, err := o.findNamed(ctx, name)
	if err != nil || !found || meta.Status.IsTerminal() {
		return "", err
	}
	return meta.ID, nil
}
