package bgtask

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/store"
)

// maxOwnerHops bounds the walk up a lineage from a dead sub-agent to the
// owner that hears of its tasks, against a cycle in corrupt records.
const maxOwnerHops = 64

// UndeliveredOwners yields, each once, the owners that have something to
// hear after a restart: a terminal record whose end was never announced
// to them (a task interrupted by a crash, or that ended after their loop
// last took its events), or a notice of a SharedStore not yet taken. Their
// next run start (Receiver.RunStart, or Restore) delivers it. It is an
// administrator's call, reachable from no Owner view or tool: a host uses
// it to wake the threads that have news, WithOnPendingOwner does so at
// start.
//
// The tasks of a sub-agent that is gone (its record is terminal) belong
// to its nearest owner up the lineage that is not such a task: that owner
// is yielded, never the dead task's id; a live sub-agent's id is yielded as
// itself. An owner may be yielded whose events this Manager delivered but
// whose loop has not marked them announced yet.
//
// With a Store that is not an UndeliveredLister it yields nothing. A
// failure (the Store's, or ctx's) is yielded once, as the last pair, with
// "". It keeps working after Shutdown.
func (m *Manager) UndeliveredOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		l, ok := m.store.(store.UndeliveredLister)
		if !ok {
			return
		}
		seen := make(map[string]bool)
		for raw, err := range l.UndeliveredOwners(ctx) {
			if err != nil {
				yield("", fmt.Errorf("bgtask: undelivered owners: %w", err))
				return
			}
			owner, err := m.liveOwner(ctx, raw)
			if err != nil {
				yield("", fmt.Errorf("bgtask: undelivered owners: %w", err))
				return
			}
			if seen[owner] {
				continue
			}
			seen[owner] = true
			if !yield(owner, nil) {
				return
			}
		}
	}
}

// liveOwner returns the owner that hears of owner's tasks: owner itself,
// unless it is the id of a task that has ended, or that a previous run of
// this instance left live (a gone sub-agent either way), in which case the
// owner of that task, and so on up the lineage.
func (m *Manager) liveOwner(ctx context.Context, owner string) (string, error) {
	for range maxOwnerHops {
		if !strings.HasPrefix(owner, idgen.TaskPrefix) {
			return owner, nil // not a task id: no read needed (most owners are threads)
		}
		meta, err := m.store.Get(ctx, owner)
		switch {
		case errors.Is(err, ErrNotFound):
			return owner, nil // not a task: a thread or an agent of the host
		case err != nil:
			return "", err
		case meta.Owner == owner:
			return owner, nil // a corrupt self-owned record: stop here
		case !meta.Status.IsTerminal() && !m.leftByPreviousRun(&meta):
			return owner, nil // a live sub-agent hears of its own tasks
		}
		owner = meta.Owner
	}
	return owner, nil
}

// WithOnPendingOwner sets a function that New's Manager calls once for
// each owner that has something to hear (see Manager.UndeliveredOwners),
// so a host can wake the threads a restart left with news: start a run for
// each, whose RunStart delivers it. It runs once, on a goroutine the
// Manager starts in New: first the Manager recovers what runtime instances
// that are gone left running (Manager.InterruptOrphaned; a durable store also did so
// when it opened), then it calls f with each owner in turn, and then, once
// each, with the owners of records that a previous run of this Manager's
// instance left queued or running (a store that is an InstanceOwnerLister:
// a process restarted with the same instance id). Shutdown (and
// Stop) waits for that pass to end and does not cut it short, so a Manager
// shut down at once still calls f for every owner (whose run start then
// fails with ErrClosed). Later, each time a SharedStore's reaper
// interrupts the tasks of an instance that is gone, f is called once for
// each owner that pass gave a notice (store.OwnerNotifier). f is called on
// the Manager's callback goroutine (see WithObserver), in order, with no
// lock of bgtask held: it may call the Manager. A panic in f is recovered
// and logged with its name, and the next owner is still called. A failure
// to list the owners is logged. Default: none.
func WithOnPendingOwner(f func(owner string)) Option {
	return func(c *config) { c.onPendingOwner = f }
}

// startPendingOwners starts the goroutine of WithOnPendingOwner. Shutdown
// waits for it as for a task's.
func (m *Manager) startPendingOwners() {
	m.startHelper(func() { m.callPendingOwners(context.Background()) })
}

// callPendingOwners recovers, lists the owners with news and calls the
// WithOnPendingOwner function with each.
func (m *Manager) callPendingOwners(ctx context.Context) {
	if r, ok := m.store.(store.OrphanInterrupter); ok {
		if n, err := r.InterruptOrphaned(ctx); err != nil {
			m.log.Debug("bgtask: recovery before listing the pending owners", "err", err)
		} else if n > 0 {
			m.log.Info("bgtask: recovered records of gone runtime instances", "interrupted", n)
		}
	}
	called := make(map[string]bool)
	for owner, err := range m.UndeliveredOwners(ctx) {
		if err != nil {
			m.log.Error("bgtask: listing the owners with undelivered ends", "err", err)
			return
		}
		called[owner] = true
		m.callPendingOwner(owner)
	}
	// Then the owners of what a previous run of this instance left live:
	// their next Restore interrupts it, and tells them.
	for owner, err := range m.leftOwners(ctx) {
		if err != nil {
			m.log.Error("bgtask: listing the owners of records a previous run left", "err", err)
			return
		}
		if !called[owner] {
			called[owner] = true
			m.callPendingOwner(owner)
		}
	}
}

// callPendingOwner queues the call of the WithOnPendingOwner function
// with owner.
func (m *Manager) callPendingOwner(owner string) {
	f := m.cfg.onPendingOwner
	m.calls.call("WithOnPendingOwner", owner, func() { f(owner) })
}

// ownersNoticed carries out store.OwnerNotifier: a SharedStore's reaper
// recorded notices for owners (tasks of a gone instance it interrupted).
// The WithOnPendingOwner function is called once for each owner that hears
// of them (a dead sub-agent's notices are its live owner's), in the order
// given; nothing happens without one, or after Shutdown.
func (m *Manager) ownersNoticed(owners []string) {
	if m.cfg.onPendingOwner == nil || m.closed.Load() {
		return
	}
	called := make(map[string]bool, len(owners))
	for _, raw := range owners {
		owner, err := m.liveOwner(context.Background(), raw)
		if err != nil {
			m.log.Error("bgtask: finding who hears a reaped task's notice", "owner", raw, "err", err)
			continue
		}
		if !called[owner] {
			called[owner] = true
			m.callPendingOwner(owner)
		}
	}
}

// leftOwners yields, each once, the owners (as UndeliveredOwners names
// them) that hold a live record of this Manager's instance that this
// Manager does not run: what a previous run of the instance left, which
// the owner's next Restore interrupts and announces. With a Store that is
// not an InstanceOwnerLister it yields nothing.
func (m *Manager) leftOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		l, ok := m.store.(store.InstanceOwnerLister)
		if !ok {
			return
		}
		for owner, err := range l.InstanceOwners(ctx, m.cfg.instance) {
			if err != nil {
				yield("", err)
				return
			}
			left, err := m.leftHere(ctx, owner)
			if err != nil {
				yield("", err)
				return
			}
			if !left {
				continue
			}
			if owner, err = m.liveOwner(ctx, m.aboveLeft(ctx, owner)); err != nil {
				yield("", err)
				return
			}
			if !yield(owner, nil) {
				return
			}
		}
	}
}

// leftHere reports whether owner holds a live record of this Manager's
// instance that this Manager does not run.
func (m *Manager) leftHere(ctx context.Context, owner string) (bool, error) {
	for meta, err := range m.store.List(ctx, owner, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput) {
		if err != nil {
			return false, err
		}
		if m.leftByPreviousRun(&meta) {
			return true, nil
		}
	}
	return false, nil
}

// aboveLeft walks up from owner while it is a task that a previous run of
// this instance left (a sub-agent gone with it): its tasks are told to
// its owner.
func (m *Manager) aboveLeft(ctx context.Context, owner string) string {
	for range maxOwnerHops {
		meta, err := m.store.Get(ctx, owner)
		if err != nil || meta.Status.IsTerminal() || !m.leftByPreviousRun(&meta) || meta.Owner == owner {
			return owner
		}
		owner = meta.Owner
	}
	return owner
}

// leftByPreviousRun reports whether meta, a live record, is one a previous
// run of this Manager's instance left: written by this instance, not run
// here. Its task is gone; the next Restore of its owner interrupts it.
func (m *Manager) leftByPreviousRun(meta *bgtype.TaskMeta) bool {
	return meta.Instance == m.cfg.instance && !m.runsHere(meta.ID)
}

// runsHere reports whether this Manager runs the task id.
func (m *Manager) runsHere(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.nodes[id]
	return t != nil && t.phase.live()
}
