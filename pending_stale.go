package bgtask

import (
	"context"
	"iter"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

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
