package bgtask

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// The codes of a store.Delivery this runtime gives: each error a local send
// returns, by kind. The text travels with it.
const (
	codeNotFound       = "not_found"
	codeTerminal       = "terminal:" // followed by the status
	codeNotSubAgent    = "not_subagent"
	codeNoInputRequest = "no_input_request"
	codeInboxClosed    = "inbox_closed"
	codeClosed         = "closed"
	codeInvalid        = "invalid"
	codeError          = "error"
)

// messageRequested hands msg, sent by owner from another instance, to task
// id if this Manager runs it, as Send does, and returns the outcome to
// carry back: the message's id in the task's history, or the kind and
// text of the error. It never carries the message on
// (store.Runtime.MessageRequested).
func (m *Manager) messageRequested(ctx context.Context, owner, id string, msg bgtype.Message) store.Delivery {
	msgID, err := m.sendVia(ctx, owner, id, msg, false)
	if err == nil {
		return store.Delivery{MessageID: msgID}
	}
	return deliveryOf(err)
}

// deliveryOf is the outcome that carries err, a local call's error, back to
// the instance that asked: its kind and its text.
func deliveryOf(err error) store.Delivery {
	var se *StatusError
	code := codeError
	switch {
	case errors.As(err, &se):
		code = codeTerminal + string(se.Status)
	case errors.Is(err, ErrNotFound):
		code = codeNotFound
	case errors.Is(err, ErrNotSubAgent):
		code = codeNotSubAgent
	case errors.Is(err, ErrNoInputRequest):
		code = codeNoInputRequest
	case errors.Is(err, ErrInboxClosed):
		code = codeInboxClosed
	case errors.Is(err, ErrClosed):
		code = codeClosed
	case errors.Is(err, ErrInvalidArgument):
		code = codeInvalid
	}
	return store.Delivery{Code: code, Text: err.Error()}
}

// sendElsewhere carries msg to meta's task, which another instance runs,
// through the store, and returns the outcome as a local send would.
func (m *Manager) sendElsewhere(ctx context.Context, mc store.MessageCarrier, owner string, meta bgtype.TaskMeta, msg bgtype.Message) (string, error) {
	d, err := mc.SendMessage(ctx, owner, meta.ID, msg)
	if err != nil {
		return "", fmt.Errorf("bgtask: send to %s on instance %q: %w", meta.ID, meta.Instance, err)
	}
	if d.Code == store.DeliveryEnded {
		// It ended before the message was recorded: say how, as here.
		now, err := m.store.Get(ctx, meta.ID)
		if err != nil {
			return "", err
		}
		return "", &StatusError{TaskID: meta.ID, Status: now.Status}
	}
	return d.MessageID, deliveryError(meta, d)
}

// deliveryError is the error a carried message's outcome d stands for: the
// one the task's instance gave, with its text, matching what it matched
// there; nil when the task took the message.
func deliveryError(meta bgtype.TaskMeta, d store.Delivery) error {
	switch {
	case d.Code == "":
		return nil
	case strings.HasPrefix(d.Code, codeTerminal):
		return &StatusError{TaskID: meta.ID, Status: bgtype.Status(strings.TrimPrefix(d.Code, codeTerminal))}
	case d.Code == store.DeliveryGone:
		return &folded{fmt.Sprintf("bgtask: task %s: its instance %q is gone (the task is interrupted); the message was not delivered", meta.ID, d.Text), []error{ErrTerminal}}
	case d.Code == codeNotFound:
		return errNotOwner
	case d.Code == codeClosed: // that instance is shutting down, not this one
		return &folded{fmt.Sprintf("%s: task %s: its instance %q is shutting down", ErrInboxClosed, meta.ID, meta.Instance), []error{ErrInboxClosed}}
	}
	kinds := map[string]error{codeNotSubAgent: ErrNotSubAgent, codeNoInputRequest: ErrNoInputRequest,
		codeInboxClosed: ErrInboxClosed, codeInvalid: ErrInvalidArgument}
	if k := kinds[d.Code]; k != nil {
		return &folded{d.Text, []error{k}}
	}
	return errors.New(d.Text)
}
