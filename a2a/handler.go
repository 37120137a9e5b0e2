package bga2a

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// handler implements a2asrv.RequestHandler on the Manager: every call acts
// for the request's owner, through its Owner view.
type handler struct{ s *Server }

// messageFrom is the sender of the messages a client's message becomes.
const messageFrom = "user"

func (h handler) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	s := h.s
	o, f, first, err := s.begin(ctx, params)
	if err != nil {
		return nil, err
	}
	nonBlocking := params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking
	if nonBlocking || isFinal(first.Status.State) {
		f.stopFollowing()
		return first, nil
	}
	var streamErr error
	s.follow(ctx, o, f, first, func(_ a2a.Event, err error) bool {
		streamErr = err
		return true
	})
	if streamErr != nil {
		return nil, streamErr
	}
	return s.snapshot(ctx, o, string(first.ID), "")
}

func (h handler) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		o, f, first, err := h.s.begin(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		h.s.follow(ctx, o, f, first, yield)
	}
}

func (h handler) OnResubscribeToTask(ctx context.Context, params *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s := h.s
		o, err := s.ownerOf(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		if params == nil || params.ID == "" {
			yield(nil, fmt.Errorf("task id is required: %w", a2a.ErrInvalidParams))
			return
		}
		id := string(params.ID)
		if _, err := o.Get(ctx, id); err != nil {
			yield(nil, taskErr(id, err))
			return
		}
		f, err := s.followTask(o, id)
		if err != nil {
			yield(nil, err)
			return
		}
		first, err := s.snapshot(ctx, o, id, "")
		if err != nil {
			f.stopFollowing()
			yield(nil, err)
			return
		}
		s.follow(ctx, o, f, first, yield)
	}
}

func (h handler) OnGetTask(ctx context.Context, query *a2a.TaskQueryParams) (*a2a.Task, error) {
	o, err := h.s.ownerOf(ctx)
	if err != nil {
		return nil, err
	}
	if query == nil || query.ID == "" {
		return nil, fmt.Errorf("task id is required: %w", a2a.ErrInvalidParams)
	}
	t, err := h.s.snapshot(ctx, o, string(query.ID), "")
	if err != nil {
		return nil, err
	}
	if n := query.HistoryLength; n != nil && *n < len(t.History) {
		t.History = t.History[len(t.History)-max(*n, 0):]
	}
	return t, nil
}

func (h handler) OnCancelTask(ctx context.Context, params *a2a.TaskIDParams) (*a2a.Task, error) {
	s := h.s
	o, err := s.ownerOf(ctx)
	if err != nil {
		return nil, err
	}
	if params == nil || params.ID == "" {
		return nil, fmt.Errorf("task id is required: %w", a2a.ErrInvalidParams)
	}
	id := string(params.ID)
	rec, err := o.Get(ctx, id)
	if err != nil {
		return nil, taskErr(id, err)
	}
	if rec.Status.IsTerminal() {
		if rec.Status == bgtask.StatusCancelled {
			return s.snapshot(ctx, o, id, "")
		}
		return nil, fmt.Errorf("task %s is %s: %w", id, State(rec.Status), a2a.ErrTaskNotCancelable)
	}
	// The sub-agent's own tasks are its descendants: they are cancelled too.
	if _, err := o.CancelTree(ctx, id); err != nil {
		return nil, taskErr(id, err)
	}
	if _, err := o.Wait(ctx, id); err != nil && !errors.Is(err, bgtask.ErrNotLive) {
		return nil, taskErr(id, err)
	}
	return s.snapshot(ctx, o, id, "")
}

func (handler) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (handler) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (handler) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (handler) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

func (handler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

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
	msg := bgtask.Message{From: messageFrom, Content: text}
	if id := string(params.Message.TaskID); id != "" {
		return s.resume(ctx, o, id, params.Message.ContextID, msg)
	}
	return s.spawn(ctx, o, msg)
}

// spawn starts the sub-agent and puts the message in its inbox, as its
// first message.
func (s *Server) spawn(ctx context.Context, o bgtask.Owner, msg bgtask.Message) (bgtask.Owner, *follower, *a2a.Task, error) {
	p, err := s.hub.lock(o.ID())
	if err != nil {
		return o, nil, nil, err
	}
	opts := append(slices.Clone(s.cfg.spawnOpts), bgtask.WithWake(bgtask.WakeOnActivity))
	id, err := o.SpawnAgent(ctx, s.agent, opts...)
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
		first.History = append(first.History, s.historyOf(id, []bgtask.MessageRecord{{Direction: bgtask.MessageIn, Content: msg.Content}})...)
		// A sub-agent that ended before reading its inbox is reported as ended.
		if err = o.Send(ctx, id, msg); errors.Is(err, bgtask.ErrTerminal) || errors.Is(err, bgtask.ErrInboxClosed) {
			err = nil
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
func (s *Server) resume(ctx context.Context, o bgtask.Owner, id, contextID string, msg bgtask.Message) (bgtask.Owner, *follower, *a2a.Task, error) {
	f, err := s.followTask(o, id)
	if err != nil {
		return o, nil, nil, err
	}
	first, err := s.deliver(ctx, o, id, contextID, msg)
	if err != nil {
		f.stopFollowing()
		return o, nil, nil, err
	}
	return o, f, first, nil
}

// deliver is resume once the follower is registered.
func (s *Server) deliver(ctx context.Context, o bgtask.Owner, id, contextID string, msg bgtask.Message) (*a2a.Task, error) {
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
	if rec.Status == bgtask.StatusAwaitingInput && rec.Input != nil {
		msg.InReplyTo, answered = rec.Input.ID, rec.Input.ID
	}
	err = o.Send(ctx, id, msg)
	if errors.Is(err, bgtask.ErrNoInputRequest) { // answered or withdrawn meanwhile
		msg.InReplyTo, answered = "", ""
		err = o.Send(ctx, id, msg)
	}
	switch {
	case errors.Is(err, bgtask.ErrTerminal), errors.Is(err, bgtask.ErrInboxClosed):
		st := bgtask.StatusCompleted
		if rec, gerr := o.Get(ctx, id); gerr == nil {
			st = rec.Status
		}
		return nil, terminalErr(id, st)
	case errors.Is(err, bgtask.ErrNotSubAgent):
		return nil, fmt.Errorf("task %s takes no messages: %w", id, a2a.ErrUnsupportedOperation)
	case err != nil:
		return nil, taskErr(id, err)
	}
	history = append(history, bgtask.MessageRecord{Direction: bgtask.MessageIn, Content: msg.Content})
	if answered == "" && rec.Status == bgtask.StatusAwaitingInput {
		rec.Status = bgtask.StatusRunning // the request was answered meanwhile
	}
	return s.taskOf(rec, history, answered), nil
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

// follow yields first, then the task's events as the follower gets them,
// until one ends the stream (the task's end, or an input request), yield
// returns false, or ctx ends. If the events stop before that (the server
// closed, the Manager shut down, the client fell too far behind), the
// task's record says how it ended, or the stream ends with an error.
func (s *Server) follow(ctx context.Context, o bgtask.Owner, f *follower, first *a2a.Task, yield func(a2a.Event, error) bool) {
	defer f.stopFollowing()
	if !yield(first, nil) || isFinal(first.Status.State) {
		return
	}
	id := string(first.ID)
	for {
		evs, err := f.next(ctx)
		for _, ev := range evs {
			out, final := s.eventsOf(ev)
			for _, e := range out {
				if !yield(e, nil) {
					return
				}
			}
			if final {
				return
			}
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if rec, gerr := o.Get(ctx, id); gerr == nil {
			if ev, ok := endOf(rec); ok {
				out, _ := s.eventsOf(ev)
				for _, e := range out {
					if !yield(e, nil) {
						return
					}
				}
				return
			}
		}
		yield(nil, fmt.Errorf("events of task %s: %w", id, err))
		return
	}
}

// endOf is the event that a record in a final state would have sent.
func endOf(rec bgtask.TaskMeta) (bgtask.Event, bool) {
	ev := bgtask.Event{TaskID: rec.ID, Result: rec.Result, Error: rec.Error, Input: rec.Input}
	switch rec.Status {
	case bgtask.StatusCompleted:
		ev.Kind = bgtask.EventCompleted
	case bgtask.StatusFailed:
		ev.Kind = bgtask.EventFailed
	case bgtask.StatusInterrupted:
		ev.Kind = bgtask.EventInterrupted
	case bgtask.StatusCancelled:
		ev.Kind = bgtask.EventCancelled
	case bgtask.StatusAwaitingInput:
		ev.Kind = bgtask.EventInputRequested
	default:
		return ev, false
	}
	return ev, true
}

// isFinal reports whether a state ends a stream.
func isFinal(st a2a.TaskState) bool {
	return st.Terminal() || st == a2a.TaskStateInputRequired
}

// taskErr maps a bgtask error about task id to its A2A error. Another
// owner's task is not found, exactly as an unknown id.
func taskErr(id string, err error) error {
	switch {
	case errors.Is(err, bgtask.ErrNotFound):
		return fmt.Errorf("task %s: %w", id, a2a.ErrTaskNotFound)
	case errors.Is(err, bgtask.ErrClosed):
		return fmt.Errorf("%w: %w", a2a.ErrServerError, err)
	}
	return err
}

// terminalErr is the error of a message to an ended task: an
// unsupported operation, as the A2A specification names it (a task in a
// terminal state cannot be restarted) and the A2A JavaScript SDK answers.
func terminalErr(id string, st bgtask.TaskStatus) error {
	return fmt.Errorf("task %s is in a terminal state %q and takes no more messages: %w", id, State(st), a2a.ErrUnsupportedOperation)
}

// spawnErr maps a spawn's error: a full concurrency limit or a closed
// Manager is the server's state, not the request's fault.
func spawnErr(err error) error {
	switch {
	case errors.Is(err, bgtask.ErrLimit), errors.Is(err, bgtask.ErrClosed):
		return fmt.Errorf("%w: %w", a2a.ErrServerError, err)
	}
	return err
}
