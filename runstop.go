package bgtask

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// A stop of a run, wherever it runs. CancelRun cancels a run's tasks on
// every instance; the run itself (its turn: a model call, the tools it
// calls next) lives on the instance whose Receiver opened it. That
// Receiver hears of the cancel (ReceiverConfig.OnRunCanceled), from this
// instance or, carried by a store.RunLeaser, from another one, and the
// host ends the turn; the Manager there refuses later spawns into it.

// RunStoppedError is the cause of a run's context cancelled because the
// run was stopped (Owner.StopRun, Owner.CancelRun): it matches
// ErrRunStopped, so RunStopped reports true, and carries the stop's
// reason. The agent package's Threads cancels a turn's context with it.
type RunStoppedError struct {
	// Reason is the stop's reason, "" when none was given.
	Reason string
}

// Error returns ErrRunStopped's text, with the reason after a colon.
func (e *RunStoppedError) Error() string {
	if e.Reason == "" {
		return ErrRunStopped.Error()
	}
	return ErrRunStopped.Error() + ": " + e.Reason
}

// Unwrap returns ErrRunStopped.
func (e *RunStoppedError) Unwrap() error { return ErrRunStopped }

// StoppedRun is what Owner.StopRun stopped.
type StoppedRun struct {
	// RunID is the run stopped; "" when the owner had no open run.
	RunID string
	// Instance is the instance whose Receiver holds the run (this
	// Manager's WithInstance id when it is here).
	Instance string
	// Canceled is how many tasks the stop cancelled, as CancelRun counts.
	Canceled int
}

// StopRun stops the owner's open run, wherever it runs: the run its live
// Receiver opened on this Manager, or, with a store that keeps runs across
// instances (store.RunLeaser: pgstore), on another live instance. It is
// CancelRun of that run with reason (StopReason when empty), which cancels
// the run's tasks on every instance, refuses later spawns into it, and
// tells the Receiver that holds the run (ReceiverConfig.OnRunCanceled),
// whose host ends the turn. It returns the run stopped; a zero StoppedRun
// and nil when the owner has no open run. ctx bounds the store calls.
// Errors: ErrInvalidArgument (blank owner), ErrClosed, the store's.
func (o Owner) StopRun(ctx context.Context, reason string) (StoppedRun, error) {
	switch {
	case !bgtype.ValidOwner(o.id):
		return StoppedRun{}, bgtype.ErrInvalidOwner
	case o.m.closed.Load():
		return StoppedRun{}, ErrClosed
	}
	if reason == "" {
		reason = StopReason
	}
	stop := StoppedRun{Instance: o.m.cfg.instance}
	if r := o.m.liveReceiver(o.id); r != nil {
		r.mu.Lock()
		if r.running.Load() {
			stop.RunID = r.runID
		}
		r.mu.Unlock()
	}
	if stop.RunID == "" {
		l, ok := o.m.store.(store.RunLeaser)
		if !ok {
			return StoppedRun{}, nil
		}
		run, instance, err := l.HeldRun(ctx, o.id)
		if err != nil || run == "" {
			return StoppedRun{}, err
		}
		stop.RunID, stop.Instance = run, instance
	}
	n, _, err := o.cancelRunCtx(ctx, stop.RunID, cancelReason([]CancelOption{WithReason(reason)}))
	stop.Canceled = n
	return stop, err
}

// RunCanceled reports whether the owner's run runID was cancelled on this
// Manager: by CancelRun or StopRun here, or by a stop asked on another
// instance and carried out here. A run is marked cancelled before any of
// its tasks is, so a host whose tool call failed because its task was
// cancelled (ErrCanceled) can tell a stop of the turn from a cancel of
// that task alone, even before OnRunCanceled reached the turn. It
// remembers the last Tuning.CanceledRunsKept cancelled runs; it never
// blocks on a task and is safe for concurrent use.
func (o Owner) RunCanceled(runID string) bool {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	rs := o.m.runs[runKey{owner: o.id, run: runID}]
	return rs != nil && rs.canceled
}

// runCancelRequested carries out a cancel of the owner's run asked on
// another instance (store.RunLeaser.RequestRunCancel): the run is marked
// cancelled here (later spawns into it fail), its tasks here are
// cancelled with reason, and the owner's Receiver, if the run is its open
// one, is told (ReceiverConfig.OnRunCanceled). The instance that asked
// cancelled the run's tasks on the other instances already
// (store.RunCancelHandler).
func (m *Manager) runCancelRequested(_ context.Context, owner, run, reason string) int {
	if !bgtype.ValidOwner(owner) || run == "" {
		return 0
	}
	n, _ := m.cancelRun(runKey{owner: owner, run: run}, reason)
	m.tellRunCanceled(owner, run, reason)
	return n
}

// receiverOf returns owner's live Receiver on m (a sub-agent's too), or
// nil.
func (m *Manager) receiverOf(owner string) *Receiver {
	m.keepMu.Lock()
	s := m.sinks[owner]
	m.keepMu.Unlock()
	r, _ := s.(*Receiver)
	return r
}

// liveReceiver returns owner's live Receiver on m (not a sub-agent's), or
// nil.
func (m *Manager) liveReceiver(owner string) *Receiver {
	if r := m.receiverOf(owner); r != nil && r.fixed == nil {
		return r
	}
	return nil
}

// tellRunCanceled calls OnRunCanceled of owner's Receiver on m if run is
// its open run. Called with no lock held.
func (m *Manager) tellRunCanceled(owner, run, reason string) {
	r := m.liveReceiver(owner)
	if r == nil || r.onRunCanceled == nil {
		return
	}
	r.mu.Lock()
	open := r.running.Load() && r.runID == run
	r.mu.Unlock()
	if !open {
		return
	}
	f := r.onRunCanceled
	// At once, on this goroutine (no lock is held): a stop returns once
	// the turn heard it, so the turn's tools see the stop, not only the
	// cancel of their tasks.
	m.calls.callNow("OnRunCanceled", owner, func() { f(run, reason) })
}

// requestRunCancel asks the instance that holds the owner's open run run,
// if another one, to cancel it (RunCancelRequested there), and returns
// that instance ("" for none).
func (m *Manager) requestRunCancel(ctx context.Context, owner, run, reason string) (string, error) {
	l, ok := m.store.(store.RunLeaser)
	if !ok {
		return "", nil
	}
	holder, err := l.RequestRunCancel(ctx, owner, run, reason, m.cfg.instance)
	if err != nil {
		return "", fmt.Errorf("bgtask: cancel run %q on the instance that holds it: %w", run, err)
	}
	return holder, nil
}
