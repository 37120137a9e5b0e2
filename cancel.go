package bgtask

import (
	"context"
	"fmt"
)

// Cancel asks one task to stop, whoever owns it, and returns 1 if it
// signalled a live task, 0 if the task had ended or was already signalled.
// With a SharedStore, a task that another instance runs is reached through
// SharedStore.RequestCancel, and counts 1 once the request is recorded.
// The task's context is cancelled with cause ErrCancelled; its descendants
// are not (see CancelTree). ErrNotFound for an unknown id.
func (m *Manager) Cancel(ctx context.Context, id string) (int, error) {
	return m.cancelTask(ctx, "", id, false)
}

// CancelTree cancels a task (cause ErrCancelled) and its attached
// descendants (cause ErrParentCancelled), and returns how many live tasks it
// signalled. Detached descendants are left running. Its cost is the size of
// the subtree, not of the Manager. ErrNotFound for an unknown id.
func (m *Manager) CancelTree(ctx context.Context, id string) (int, error) {
	return m.cancelTask(ctx, "", id, true)
}

// cancelTask cancels id, or its tree; owner "" means any owner.
func (m *Manager) cancelTask(ctx context.Context, owner, id string, tree bool) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if owner != "" && !validOwner(owner) {
		return 0, ErrInvalidOwner
	}
	var (
		n      int
		starts []*Task
	)
	m.mu.Lock()
	t := m.nodes[id]
	if t != nil && (owner == "" || t.rec.Owner == owner) {
		if tree {
			n, starts = m.cancelSubtree(t, ErrCancelled, ErrParentCancelled, nil)
		} else {
			var ok bool
			if ok, starts = m.signal(t, ErrCancelled, nil); ok {
				n = 1
			}
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	if t != nil {
		if owner != "" && t.rec.Owner != owner {
			return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return n, nil
	}
	// Not run here: it ended, or it is only in the store.
	meta, err := m.store.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	if owner != "" && meta.Owner != owner {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if shared, ok := m.store.(SharedStore); ok && !meta.Status.IsTerminal() && meta.Instance != m.cfg.instance {
		// Another instance runs it: the store carries the request there.
		if err := shared.RequestCancel(ctx, id, tree); err != nil {
			return 0, fmt.Errorf("bgtask: cancel %s on instance %q: %w", id, meta.Instance, err)
		}
		return 1, nil
	}
	return 0, nil
}

// CancelAll cancels every live task of this Manager, whoever owns it,
// detached ones included, with cause (ErrCancelled when nil), and returns
// how many it signalled. Unlike Shutdown it does not close the Manager. A
// shared store calls it with ErrInstanceLost when this instance lost its
// registration, so that no task goes on writing what another instance has
// already reaped.
func (m *Manager) CancelAll(cause error) int {
	if cause == nil {
		cause = ErrCancelled
	}
	var (
		n      int
		starts []*Task
	)
	m.mu.Lock()
	for _, t := range m.nodes {
		var ok bool
		if ok, starts = m.signal(t, cause, starts); ok {
			n++
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	return n
}

// CancelOwner cancels every live task of owner, detached ones included, with
// cause ErrCancelled, and returns how many it signalled.
func (m *Manager) CancelOwner(owner string) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if !validOwner(owner) {
		return 0, ErrInvalidOwner
	}
	var (
		n      int
		starts []*Task
	)
	m.mu.Lock()
	if os := m.owners[owner]; os != nil {
		for t := os.head; t != nil; t = t.ownerNext {
			var ok bool
			if ok, starts = m.signal(t, ErrCancelled, starts); ok {
				n++
			}
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	return n, nil
}

// CancelRun cancels every attached task of the run and their attached
// descendants, with cause ErrRunCancelled, and returns how many live tasks it
// signalled. From then on a spawn into the run, a nested one included, fails
// with ErrRunCancelled; the check is made under the same lock as the
// registration, so no spawn slips through. ErrInvalidRun for an empty id.
func (m *Manager) CancelRun(runID string) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	if runID == "" {
		return 0, ErrInvalidRun
	}
	var (
		n      int
		starts []*Task
	)
	m.mu.Lock()
	rs := m.runs[runID]
	if rs == nil {
		rs = &runState{}
		m.runs[runID] = rs
	}
	if !rs.cancelled {
		rs.cancelled = true
		if rs.live == 0 {
			m.retireRun(runID, rs)
		}
	}
	for t := rs.head; t != nil; t = t.runNext {
		var k int
		k, starts = m.cancelSubtree(t, ErrRunCancelled, ErrRunCancelled, starts)
		n += k
	}
	m.mu.Unlock()
	m.startAll(starts)
	return n, nil
}
