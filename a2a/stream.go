package bga2a

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

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
func endOf(rec bgtype.TaskMeta) (bgtype.Event, bool) {
	ev := bgtype.Event{TaskID: rec.ID, Result: rec.Result, Error: rec.Error, Input: rec.Input}
	switch rec.Status {
	case bgtype.StatusCompleted:
		ev.Kind = bgtype.EventCompleted
	case bgtype.StatusFailed:
		ev.Kind = bgtype.EventFailed
	case bgtype.StatusInterrupted:
		ev.Kind = bgtype.EventInterrupted
	case bgtype.StatusCanceled:
		ev.Kind = bgtype.EventCanceled
	case bgtype.StatusAwaitingInput:
		ev.Kind = bgtype.EventInputRequested
	default:
		return ev, false
	}
	return ev, true
}

// isFinal reports whether a state ends a stream.
func isFinal(st a2a.TaskState) bool {
	return st.Terminal() || st == a2a.TaskStateInputRequired
}
