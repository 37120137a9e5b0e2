package bgtask

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/jsoncap"
	"github.com/bgtask/bgtask/store"
)

// Send delivers a message to a live sub-agent on behalf of owner, the agent
// that claims to own it. Errors, in the order they are checked: ErrInvalidArgument (blank owner),
// ErrClosed, ErrNotFound (no such task, or another owner's: the text says which),
// ErrTerminal (a *StatusError),
// ErrNotSubAgent, ErrInboxClosed. A message whose InReplyTo names the
// task's open input request (Task.RequestInput) answers it instead, for a
// plain task too; ErrNoInputRequest if there is no such request. Owner.Send is the same call as seen by one
// owner, which reports another owner's task as not found.
//
// With a store that carries messages (store.MessageCarrier, as pgstore), a
// task that another live instance runs is reached too: the message is
// recorded for that instance, which hands it to the task (or answers the
// input request) once, in the order sent; Send returns once it did, with
// the same errors as here for the same mistakes. It waits for that until
// ctx ends: then the message is withdrawn, unless that instance was
// handing it over already (the error then says it may have been
// delivered). When that instance dies first, Send fails with an error
// matching ErrTerminal that says the instance is gone and the task is
// interrupted. With a store that cannot carry it (two processes on one
// SQLite file), a live task that another process runs gets an error
// matching ErrElsewhere (and ErrInboxClosed).
//
// It returns the id of the message in the task's history (Owner.Messages),
// as Owner.Send does.
func (m *Manager) Send(ctx context.Context, owner, id string, msg bgtype.Message) (string, error) {
	return m.sendMessage(ctx, owner, id, msg)
}

// sendMessage is send that also returns the id of the message in the task's
// history (Owner.Messages). A delivered message is recorded there under the
// task's emitMu, so it keeps its place among the messages the task sends.
func (m *Manager) sendMessage(ctx context.Context, owner, id string, msg bgtype.Message) (string, error) {
	return m.sendVia(ctx, owner, id, msg, true)
}

// sendVia is sendMessage; carry says whether a task another instance runs
// is reached through the store (never for a message carried here).
func (m *Manager) sendVia(ctx context.Context, owner, id string, msg bgtype.Message, carry bool) (string, error) {
	switch {
	case !bgtype.ValidOwner(owner):
		return "", bgtype.ErrInvalidOwner
	case m.closed.Load():
		return "", ErrClosed
	}
	m.mu.Lock()
	t := m.nodes[id]
	if t != nil && !t.phase.live() {
		t = nil
	}
	m.mu.Unlock()
	if t == nil {
		meta, err := m.store.Get(ctx, id)
		switch {
		case err != nil:
			return "", err
		case meta.Owner != owner:
			return "", errNotOwner
		case meta.Status.IsTerminal():
			return "", &StatusError{TaskID: id, Status: meta.Status}
		}
		if mc, ok := m.store.(store.MessageCarrier); ok && carry && meta.Instance != m.cfg.instance {
			return m.sendElsewhere(ctx, mc, owner, meta, m.capMessage(msg))
		}
		switch {
		case meta.Type != bgtype.TypeSubAgent && msg.InReplyTo == "":
			return "", fmt.Errorf("%w: %s", ErrNotSubAgent, id)
		case m.runsElsewhere(ctx, &meta):
			return "", elsewhereError(&meta, ErrInboxClosed)
		case meta.Type != bgtype.TypeSubAgent:
			return "", fmt.Errorf("%w: %s", ErrNotSubAgent, id)
		}
		return "", fmt.Errorf("%w: %s is not running in this manager", ErrInboxClosed, id)
	}
	msg = m.capMessage(msg)
	switch {
	case t.rec.Owner != owner:
		return "", errNotOwner
	case msg.InReplyTo != "":
		return t.answer(msg)
	case t.agentInbox() == nil:
		return "", fmt.Errorf("%w: %s", ErrNotSubAgent, id)
	}
	payload, err := json.Marshal(msg)
	if err != nil {
		return "", err
	}
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	if err := t.agentInbox().Send(bgtype.Event{Kind: bgtype.EventCustom, TaskID: id, Name: t.rec.Name(), EventType: bgtype.EventTypeMessage, Payload: payload}); err != nil {
		return "", err
	}
	return m.msgs.add(id, MessageIn, msg), nil
}

// capMessage cuts a message's Content and From to Caps.MaxMessageBytes.
func (m *Manager) capMessage(msg bgtype.Message) bgtype.Message {
	msg.Content, _ = jsoncap.Text(msg.Content, m.cfg.caps.MaxMessageBytes)
	msg.From, _ = jsoncap.Text(msg.From, m.cfg.caps.MaxMessageBytes)
	return msg
}

// SendToOwner sends a message from the task to its owner (the agent that
// started it), as a custom event of type EventTypeMessage, as
// Emit(EventTypeMessage, Message{From: t.ID(), Content: content}) does, and
// returns the message's id in the task's history (Owner.Messages). A tool
// that lets a task's model talk to its parent uses it. Errors:
// ErrInboxClosed when the owner is a sub-agent that has ended (nothing
// would read the message) or the owner's inbox refuses it, ErrTerminal
// once the task's function has returned. ctx is used for reading the
// owner's record only.
func (t *Task) SendToOwner(ctx context.Context, content string) (string, error) {
	owner := t.rec.Owner
	if meta, err := t.m.store.Get(ctx, owner); err == nil && meta.Status.IsTerminal() {
		return "", fmt.Errorf("%w: the owner %s has ended", ErrInboxClosed, owner)
	}
	return t.emit(bgtype.EventTypeMessage, bgtype.Message{From: t.rec.ID, Content: content})
}
