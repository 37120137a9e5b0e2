package bgtask

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// A Plugin's lifecycle on its Manager: one live Plugin per owner, Close.

// Errors of a Plugin's lifecycle and runs.
var (
	// ErrPluginExists is returned by NewPlugin for an owner that already
	// has a live (not closed) Plugin on the Manager: two Plugins of one
	// owner would take each other's events. Close the first one, or reuse
	// it.
	ErrPluginExists = errors.New("bgtask: plugin: the owner has a live Plugin on this Manager")
	// ErrRunOpen is returned by Plugin.RunStart while a run is open: end
	// it with RunEnd first. Nothing was changed.
	ErrRunOpen = errors.New("bgtask: plugin: a run is already open")
	// ErrRunStopped is the cause a host cancels a run's context with when
	// the user stopped the run (context.WithCancelCause): RunStopped then
	// reports true, and the host ends the run with RunOutcome.Cancelled,
	// which cancels the tasks the run started. Any other end of the
	// context (an HTTP client that went away, a request deadline) ends
	// the run without cancelling them: their events reach the owner's next
	// run.
	ErrRunStopped = errors.New("bgtask: run stopped by the user")
)

// RunStopped reports whether ctx was cancelled because the user stopped
// the run: its cause (context.Cause) matches ErrRunStopped. It is what a
// host passes as RunOutcome.Cancelled; a context that ended for any other
// reason (the request's client hung up, a deadline) is not a stop.
func RunStopped(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrRunStopped)
}

// WithKeepLimit bounds the events kept for the owner while no run is open:
// by the Plugin between runs, and by the Manager after Close until the
// owner's next Plugin. Quiet progress is coalesced (one event per task and
// type, the latest payload), so it counts once per task. At the limit the
// oldest event that does not end a task is dropped, with a warning in the
// Manager's log; when every kept event ends a task, the oldest is dropped
// with an error in the log: with a durable Store its record, still
// unannounced, is announced again by the owner's next RunStart, so it is
// not lost; with the MemoryStore the record still tells the end (get_task,
// list_tasks). Default DefaultKeepLimit; n < 1 makes NewPlugin fail.
func WithKeepLimit(n int) PluginOption { return func(p *Plugin) { p.keepMax = n } }

// Close ends the Plugin, for a host that forgets a thread (a server drops
// the Plugin of a conversation it no longer holds in memory). An open run
// ends as RunEnd without Cancelled would end it: its tasks go on. The
// Plugin lets go of the owner, so that the Manager keeps nothing for it
// once its tasks have ended, and NewPlugin may make the owner's next
// Plugin.
//
// No event is lost: those the Plugin held undelivered, and those the
// owner's tasks send after Close, go to the owner's next Plugin, once
// each, at its first run. With a durable Store a task's end is not kept
// in memory: its record, still unannounced, is announced by the next
// Plugin's RunStart (Restore). Other events (and every event with the
// MemoryStore) are kept by the Manager under the Plugin's keep limit
// (WithKeepLimit). Marks of events handed out that a boundary could not
// commit are committed now.
//
// Close works on ctx's values only: a cancelled request context does not
// keep it from committing. It is idempotent: a second Close returns nil.
// After Close, RunStart returns an error matching ErrClosed and the other
// phases ErrNoRun. The only error is the Store's, for the marks (the
// Plugin is closed all the same; the events stay announced again at the
// next Restore).
func (p *Plugin) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	running := p.running.Load()
	p.running.Store(false)
	inbox, older, unmarked := p.inbox, p.older, p.unmarked
	p.inbox, p.older, p.unmarked = nil, nil, nil
	clear(p.drained)
	p.mu.Unlock()
	var err error
	if len(unmarked) > 0 {
		if merr := p.owner.MarkAnnounced(ctx, unmarked...); merr != nil {
			err = fmt.Errorf("bgtask: plugin: close: %w", merr)
		}
	}
	m, owner := p.owner.m, p.owner.id
	var late []bgtype.Event
	m.releaseOwner(owner, p, func() {
		p.lateMu.Lock()
		p.gone = true // from now on keepLate hands every event to orphanEvent
		late = p.late.evs
		p.late.evs = nil
		p.lateMu.Unlock()
	})
	for _, ev := range late {
		m.orphanEvent(owner, ev, p.keepMax)
	}
	if p.fixed != nil {
		return err // a sub-agent's own inbox: the Manager closes it when the sub-agent ends
	}
	if running {
		inbox.Close() // what is undrained goes to keepLate, then orphanEvent
	}
	for _, ib := range older {
		for _, ev := range ib.Drain() {
			m.orphanEvent(owner, ev, p.keepMax)
		}
	}
	// While the owner has live tasks, their events go through a closed
	// inbox to orphanEvent; it is forgotten with the owner's last task.
	m.unbindOwnerIdle(owner, p, p.keepMax)
	return err
}
