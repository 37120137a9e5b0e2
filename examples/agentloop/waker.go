package main

import (
	"context"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// waker decides when the host calls the lead model again after a run ended
// waiting for its tasks. It hears of the events that arrive between runs
// (the Plugin's OnWake); the Plugin keeps the events themselves and
// delivers them with the next run, whatever waker decides.
//
// Progress never reaches it: under the default wake policy progress is
// quiet. A cancellation does not wake the lead either while other tasks of
// it still run: in this demo the lead asked for every cancellation, and
// cancel_task's result told it already; the cancelled events are delivered
// with the next run. Events that arrive together (two researchers that
// finish at once) are delivered together: after a wake the host waits a
// short settle time before it runs.
type waker struct {
	owner  bgtask.Owner
	settle time.Duration

	mu     sync.Mutex // guards events
	events []bgtype.Event
	signal chan struct{} // one pending signal at most
}

func newWaker(owner bgtask.Owner, settle time.Duration) *waker {
	return &waker{owner: owner, settle: settle, signal: make(chan struct{}, 1)}
}

// onWake is the Plugin's OnWake callback; it never blocks.
func (w *waker) onWake(ev bgtype.Event) {
	w.mu.Lock()
	w.events = append(w.events, ev)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// reset forgets what arrived before a run starts: the run delivers it.
func (w *waker) reset() {
	w.mu.Lock()
	w.events = nil
	w.mu.Unlock()
	select {
	case <-w.signal:
	default:
	}
}

// wait returns once an event deserves the model's attention, and the settle
// time has passed, or with ctx's cause.
func (w *waker) wait(ctx context.Context) error {
	for {
		select {
		case <-w.signal:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		w.mu.Lock()
		events := w.events
		w.events = nil
		w.mu.Unlock()
		wake, err := w.worthWaking(ctx, events)
		if err != nil {
			return err
		}
		if wake {
			break
		}
	}
	t := time.NewTimer(w.settle)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// worthWaking: any event but a cancellation, or a cancellation once none of
// the lead's tasks is left running (nothing else would wake it).
func (w *waker) worthWaking(ctx context.Context, events []bgtype.Event) (bool, error) {
	for _, ev := range events {
		if ev.Kind != bgtype.EventCanceled {
			return true, nil
		}
	}
	for _, err := range w.owner.List(ctx, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput) {
		return false, err // a live task, or the error
	}
	return true, nil
}
