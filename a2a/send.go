package bga2a

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// begin starts a task (a message without a task id) or continues one, and
// returns a follower of the task, registered before the message was
// delivered, and the task to send first: for a new task as it was before its
// first message, for a continued one as it is after the delivery.
func (s *Server) begin(ctx context.Context, params *a2a.MessageSendParams) (bgtask.Owner, *follower, *a2a.Task, error) {
	o, err := s.ownerOf(ctx)
	if err != nil {
		return o, nil, nil, err
	}
	if params == nil {
		return o, nil, nil, fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	text, err := s.messageText(params.Message)
	if err != nil {
		return o, nil, nil, err
	}
	if len(params.Message.ID) > maxMessageIDBytes {
		return o, nil, nil, fmt.Errorf("messageId is longer than %d bytes: %w", maxMessageIDBytes, a2a.ErrInvalidParams)
	}
	msg := bgtype.Message{From: messageFrom, Content: text}
	if id := string(params.Message.TaskID); id != "" {
		return s.resume(ctx, o, id, params.Message.ContextID, msg, params.Message.ID)
	}
	return s.spawn(ctx, o, msg, params.Message.ID)
}

// spawn starts the sub-agent and puts the message in its inbox, as its
// first message. clientID is the client's messageId, which the task's
// history shows.
func (s *Server) spawn(ctx context.Context, o bgtask.Owner, msg bgtype.Message, clientID string) (bgtask.Owner, *follower, *a2a.Task, error) {
	p, err := s.hub.lock(o.ID())
	if err != nil {
		return o, nil, nil, err
	}
	opts := append(slices.Clone(s.cfg.spawnOpts), bgtask.WithWake(bgtype.WakeOnActivity))
	id, err := o.SpawnAgent(ctx, s.keeping, opts...)
	if err != nil {
		p.mu.Unlock()
		return o, nil, nil, spawnErr(err)
	}
	p.live[id] = struct{}{}
	f := p.follow(id)
	if err := s.hub.unlock(p); err != nil {
		f.stopFollowing()
		_, _ = o.CancelTree(context.WithoutCancel(ctx), id)
		return o, nil, nil, err
	}
	// The task as it is before its first message: a sub-agent that waits for
	// its input is still working, so a stream starts with the task, and every
	// event of the run follows it.
	first, err := s.snapshot(ctx, o, id, "")
	if err == nil {
		first.History = append(first.History, s.sentMessage(id, msg, clientID))
		// A sub-agent that ended before reading its inbox is reported as ended.
		if _, err = o.Send(ctx, id, msg); errors.Is(err, bgtask.ErrTerminal) || errors.Is(err, bgtask.ErrInboxClosed) {
			err = nil
		} else if err == nil {
			s.linkMessage(ctx, o, id, msg, clientID)
		}
	}
	if err != nil {
		f.stopFollowing()
		_, _ = o.CancelTree(context.WithoutCancel(ctx), id)
		return o, nil, nil, err
	}
	return o, f, first, nil
}

// resume delivers a message to a live task of the owner: the answer to its
// open input request, if it has one, or else a message in its inbox. The
// follower is registered and the task read before the delivery, so a stream
// starts with the task and every event the message causes follows it.
func (s *Server) resume(ctx context.Context, o bgtask.Owner, id, contextID string, msg bgtype.Message, clientID string) (bgtask.Owner, *follower, *a2a.Task, error) {
	f, err := s.followTask(o, id)
	if err != nil {
		return o, nil, nil, err
	}
	first, err := s.deliver(ctx, o, id, contextID, msg, clientID)
	if err != nil {
		f.stopFollowing()
		return o, nil, nil, err
	}
	return o, f, first, nil
}

// deliver is resume once the follower is registered.
func (s *Server) deliver(ctx context.Context, o bgtask.Owner, id, contextID string, msg bgtype.Message, clientID string) (*a2a.Task, error) {
	rec, err := o.Get(ctx, id)
	if err != nil {
		return nil, taskErr(id, err)
	}
	if rec.Status.IsTerminal() {
		return nil, terminalErr(id, rec.Status)
	}
	if contextID != "" && contextID != id {
		return nil, fmt.Errorf("contextId %q is not the task's: %w", contextID, a2a.ErrInvalidParams)
	}
	history, err := o.Messages(ctx, id)
	if err != nil {
		return nil, taskErr(id, err)
	}
	answered := ""
	if rec.Status == bgtype.StatusAwaitingInput && rec.Input != nil {
		msg.InReplyTo, answered = rec.Input.ID, rec.Input.ID
	}
	_, err = o.Send(ctx, id, msg)
	if errors.Is(err, bgtask.ErrNoInputRequest) { // answered or withdrawn meanwhile
		msg.InReplyTo, answered = "", ""
		_, err = o.Send(ctx, id, msg)
	}
	switch {
	case errors.Is(err, bgtask.ErrTerminal), errors.Is(err, bgtask.ErrInboxClosed):
		st := bgtype.StatusCompleted
		if rec, gerr := o.Get(ctx, id); gerr == nil {
			st = rec.Status
		}
		return nil, terminalErr(id, st)
	case errors.Is(err, bgtask.ErrNotSubAgent):
		return nil, fmt.Errorf("task %s takes no messages: %w", id, a2a.ErrUnsupportedOperation)
	case err != nil:
		return nil, taskErr(id, err)
	}
	s.linkMessage(ctx, o, id, msg, clientID)
	if answered == "" && rec.Status == bgtype.StatusAwaitingInput {
		rec.Status = bgtype.StatusRunning // the request was answered meanwhile
	}
	t := s.taskOf(rec, history, answered)
	t.History = append(t.History, s.sentMessage(id, msg, clientID))
	return t, nil
}

// followTask registers a follower of one of the owner's tasks.
func (s *Server) followTask(o bgtask.Owner, id string) (*follower, error) {
	p, err := s.hub.lock(o.ID())
	if err != nil {
		return nil, err
	}
	f := p.follow(id)
	if err := s.hub.unlock(p); err != nil {
		f.stopFollowing()
		return nil, err
	}
	return f, nil
}

// snapshot reads the task as the owner sees it.
func (s *Server) snapshot(ctx context.Context, o bgtask.Owner, id, answered string) (*a2a.Task, error) {
	rec, err := o.Get(ctx, id)
	if err != nil {
		return nil, taskErr(id, err)
	}
	msgs, err := o.Messages(ctx, id)
	if err != nil {
		return nil, taskErr(id, err)
	}
	return s.taskOf(rec, msgs, answered), nil
}

// sentMessage is the history entry of a client's message to task id, with
// the client's messageId (a new one if the client gave none).
func (s *Server) sentMessage(id string, msg bgtype.Message, clientID string) *a2a.Message {
	m := s.historyMessage(id, a2a.MessageRoleUser, msg.Content)
	if clientID != "" {
		m.ID = clientID
	}
	return m
}

// linkMessage links the history record of a message just delivered to
// task id to the client's messageId. A history that has forgotten it
// already links nothing.
func (s *Server) linkMessage(ctx context.Context, o bgtask.Owner, id string, msg bgtype.Message, clientID string) {
	if clientID == "" {
		return
	}
	if recs, err := o.Messages(ctx, id); err == nil {
		s.msgIDs.link(recs, msg, clientID)
	}
}
