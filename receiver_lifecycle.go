package bgtask

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
)

// A Receiver's lifecycle on its Manager: one live Receiver per owner, Close.

// Errors of a Receiver's lifecycle and runs.
var (
	// ErrReceiverExists is returned by Manager.NewReceiver (and the agent
	// package's NewPlugin) for an owner that already has a live (not
	// closed) Receiver on the Manager: two receivers of one owner would
	// take each other's events. Close the first one, or reuse it.
	ErrReceiverExists = errors.New("bgtask: the owner has a live receiver on this Manager")
	// ErrRunOpen is returned by RunStart while a run is open: end it with
	// RunEnd first. Nothing was changed.
	ErrRunOpen = errors.New("bgtask: a run is already open")
	// ErrRunStopped is the cause a host cancels a run's context with when
	// the user stopped the run (context.WithCancelCause): RunStopped then
	// reports true, and the host ends the run with RunOutcome.Canceled,
	// which cancels the tasks the run started. Any other end of the
	// context (an HTTP client that went away, a request deadline) ends
	// the run without cancelling them: their events reach the owner's next
	// run.
	ErrRunStopped = errors.New("bgtask: run stopped by the user")
)

// RunStopped reports whether ctx was cancelled because the user stopped
// the run: its cause (context.Cause) matches ErrRunStopped. It is what a
// host passes as RunOutcome.Canceled; a context that ended for any other
// reason (the request's client hung up, a deadline) is not a stop.
func RunStopped(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrRunStopped)
}

// Close ends the Receiver, for a host that forgets a thread (a server drops
// the receiver of a conversation it no longer holds in memory). An open run
// ends as RunEnd without Canceled would end it: its tasks go on. The
// Receiver lets go of the owner, so that the Manager keeps nothing for it
// once its tasks have ended, and NewReceiver may make the owner's next
// Receiver.
//
// No event is lost: those the Receiver held undelivered, and those the
// owner's tasks send after Close, go to the owner's next Receiver, once
// each, at its first run. With a durable Store a task's end is not kept
// in memory: its record, still unannounced, is announced by the next
// Receiver's RunStart (Restore). Other events (and every event with the
// in-memory store) are kept by the Manager under the Receiver's keep limit
// (ReceiverConfig.KeepLimit). Events handed out but not yet proven heard
// (see Deliver) count as undelivered: the next Receiver gets them again.
// Marks of events heard that a boundary could not commit are committed
// now.
//
// Close works on ctx's values only: a cancelled request context does not
// keep it from committing. It is idempotent: a second Close returns nil.
// After Close, RunStart returns an error matching ErrClosed and the other
// boundaries ErrNoRun. The only error is the Store's, for the marks (the
// Receiver is closed all the same; the events stay announced again at the
// next Restore).
func (r *Receiver) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	running, runID := r.running.Load(), r.runID
	if !running && r.heard != nil && r.heard.carried {
		runID = r.heard.run // the aborted run whose lease carries them: they are handed out again
	}
	r.running.Store(false)
	r.giveBack() // handed out, never proven heard: the owner's next Receiver gets them
	var unmarked []string
	if r.heard != nil {
		unmarked = r.heard.unmarked
	}
	inbox, older := r.inbox, r.older
	r.inbox, r.older, r.heard = nil, nil, nil
	clear(r.drained)
	r.mu.Unlock()
	if runID != "" {
		r.closeLease(ctx, runID, nil)
	}
	var err error
	if len(unmarked) > 0 {
		if merr := r.owner.MarkAnnounced(ctx, unmarked...); merr != nil {
			err = fmt.Errorf("bgtask: receiver: close: %w", merr)
		}
	}
	m, owner := r.owner.m, r.owner.id
	var late []bgtype.Event
	m.releaseOwner(owner, r, func() {
		r.lateMu.Lock()
		r.gone = true // from now on keepLate hands every event to orphanEvent
		late = r.late.evs
		r.late.evs = nil
		r.lateMu.Unlock()
	})
	for _, ev := range late {
		m.orphanEvent(owner, ev, r.keepMax)
	}
	if r.fixed != nil {
		return err // a sub-agent's own inbox: the Manager closes it when the sub-agent ends
	}
	if running {
		inbox.Close() // what is undrained goes to keepLate, then orphanEvent
	}
	for _, ib := range older {
		for _, ev := range ib.Drain() {
			m.orphanEvent(owner, ev, r.keepMax)
		}
	}
	// While the owner has live tasks, their events go through a closed
	// inbox to orphanEvent; it is forgotten with the owner's last task.
	m.unbindOwnerIdle(owner, r, r.keepMax)
	return err
}
