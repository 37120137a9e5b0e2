package bgtask

import (
	"context"
	"iter"
)

// InstanceOwnerLister is a SharedStore that can list the owners of one
// runtime instance's live records. A process that restarts with the same
// instance id (as a SharedStore's hosts are asked to) finds the records
// its previous run left queued or running still live: no reaper ends them,
// since the instance is alive again, and only a Restore of their owner
// does. WithOnPendingOwner uses it to wake those owners at start too.
type InstanceOwnerLister interface {
	// InstanceOwners yields, each once and in no particular order, every
	// owner that holds a queued, running or awaiting-input record of
	// instance. It changes nothing. A failure is yielded once, as the last
	// pair, with "".
	InstanceOwners(ctx context.Context, instance string) iter.Seq2[string, error]
}

// leftOwners yields, each once, the owners (as UndeliveredOwners names
// them) that hold a live record of this Manager's instance that this
// Manager does not run: what a previous run of the instance left, which
// the owner's next Restore interrupts and announces. With a Store that is
// not an InstanceOwnerLister it yields nothing.
func (m *Manager) leftOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		l, ok := m.store.(InstanceOwnerLister)
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
	for meta, err := range m.store.List(ctx, owner, StatusQueued, StatusRunning, StatusAwaitingInput) {
		if err != nil {
			return false, err
		}
		if meta.Instance == m.cfg.instance && !m.runsHere(meta.ID) {
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
		if err != nil || meta.Status.IsTerminal() || meta.Instance != m.cfg.instance || m.runsHere(owner) || meta.Owner == owner {
			return owner
		}
		owner = meta.Owner
	}
	return owner
}

// runsHere reports whether this Manager runs the task id.
func (m *Manager) runsHere(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.nodes[id]
	return t != nil && t.phase.live()
}
