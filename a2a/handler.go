package bga2a

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/bgtype"

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
		if rec.Status == bgtype.StatusCanceled {
			return s.snapshot(ctx, o, id, "")
		}
		return nil, fmt.Errorf("task %s is %s: %w", id, State(rec.Status), a2a.ErrTaskNotCancelable)
	}
	// The sub-agent's own tasks are its descendants: they are cancelled too.
	if _, err := o.CancelTree(ctx, id); err != nil {
		return nil, taskErr(id, err)
	}
	if _, err := o.Wait(ctx, id); err != nil && !errors.Is(err, bgtask.ErrNotLive) && !failedTask(err) {
		return nil, taskErr(id, err)
	}
	return s.snapshot(ctx, o, id, "")
}

// failedTask reports whether err is the *bgtask.TaskError of a task that
// ended failed: it ended, which is what a wait for its end asks.
func failedTask(err error) bool {
	_, ok := errors.AsType[*bgtask.TaskError](err)
	return ok
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
