package bgtask

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// Cancel asks one task to stop, whoever owns it, and returns 1 if it
// signalled a live task, 0 if the task had ended or was already signalled.
// It is an administrator's call: code acting for one owner uses
// Owner.Cancel, which never reaches another owner's task.
// With a SharedStore, a task that another instance runs is reached through
// SharedStore.RequestCancel, with the reason, and counts 1 once the
// request is recorded.
// The task's context is cancelled with cause ErrCanceled; its descendants
// are not (see CancelTree). ErrNotFound for an unknown id. WithReason says
// why.
func (m *Manager) Cancel(ctx context.Context, id string, opts ...CancelOption) (int, error) {
	return m.cancelTask(ctx, everyOwner, id, false, cancelReason(opts))
}

// CancelTree cancels a task (cause ErrCanceled) and its attached
// descendants (cause ErrCanceled (parent)), whoever owns them, and returns how
// many live tasks it signalled. Detached descendants are left running. Its
// cost is the size of the subtree, not of the Manager. ErrNotFound for an
// unknown id. It is an administrator's call, like Cancel. WithReason says
// why, to every task it cancels.
func (m *Manager) CancelTree(ctx context.Context, id string, opts ...CancelOption) (int, error) {
	return m.cancelTask(ctx, everyOwner, id, true, cancelReason(opts))
}

// cancelTask cancels id, or its tree, if r covers its owner; a task r does
// not cover is reported as not found.
func (m *Manager) cancelTask(ctx context.Context, r reach, id string, tree bool, reason string) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	var (
		n      int
		starts []*Task
	)
	m.mu.Lock()
	t := m.nodes[id]
	if t != nil && r.covers(t.rec.Owner) {
		if tree {
			n, starts = m.cancelSubtree(t, withReason(ErrCanceled, reason), withReason(errParentCanceled, reason), nil)
		} else {
			var ok bool
			if ok, starts = m.signal(t, withReason(ErrCanceled, reason), nil); ok {
				n = 1
			}
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	if t != nil {
		if !r.covers(t.rec.Owner) {
			return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return n, nil
	}
	// Not run here: it ended, or it is only in the store.
	meta, err := m.store.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	if !r.covers(meta.Owner) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if store.Waiting(&meta) {
		n, again, err := m.cancelWaiting(ctx, &meta, reason)
		if again { // claimed or ended first: cancel it where it is now
			return m.cancelTask(ctx, r, id, tree, reason)
		}
		return n, err
	}
	if shared, ok := m.store.(store.SharedStore); ok && !meta.Status.IsTerminal() && meta.Instance != m.cfg.instance {
		// Another instance runs it: the store carries the request there.
		if err := shared.RequestCancel(ctx, id, tree, reason); err != nil {
			return 0, fmt.Errorf("bgtask: cancel %s on instance %q: %w", id, meta.Instance, err)
		}
		return 1, nil
	}
	return 0, nil
}

// cancelWaiting ends a resumable task that waits in the queue between two
// attempts: no instance runs it, so it ends cancelled at once. The end is
// written on the attempt that waits, naming this instance, so the store
// treats it as a claim of that attempt (store rule 602b): of two cancels,
// or a cancel and a claim, from different instances the first wins and the
// other changes nothing. The goroutines of this Manager, which write the
// same instance, take turns (m.claims, and no batch claim meanwhile) and
// read the record again before they write. A cancel that lost returns again true: the task is where
// the winner put it (running elsewhere, or ended and told by the winner).
func (m *Manager) cancelWaiting(ctx context.Context, meta *bgtype.TaskMeta, reason string) (n int, again bool, err error) {
	m.claims.batch.RLock() // no batch claim of this Manager while this cancel decides
	if busy, ok := m.claims.add(meta.ID); !ok {
		m.claims.batch.RUnlock()
		select { // a claim or a cancel of this Manager: look again once it is done
		case <-busy:
			return 0, true, nil
		case <-ctx.Done():
			return 0, false, fmt.Errorf("bgtask: cancel %s: %w", meta.ID, context.Cause(ctx))
		}
	}
	defer m.claims.batch.RUnlock()
	defer m.claims.remove(meta.ID)
	cur, err := m.store.Get(ctx, meta.ID)
	if err != nil {
		return 0, false, fmt.Errorf("bgtask: cancel %s: %w", meta.ID, err)
	}
	if !store.Waiting(&cur) || cur.Attempt != meta.Attempt {
		return 0, true, nil // this Manager's turn before ours changed it
	}
	now := clock.Now()
	u := cur
	u.Status, u.Instance, u.FinishedAt = bgtype.StatusCanceled, m.cfg.instance, now
	u.Error, u.CancelReason = withReason(ErrCanceled, reason).Error(), reason
	landed, err := m.commitEnd(ctx, &u, now)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("bgtask: cancel: %w", err)
	case !landed:
		return 0, true, nil // claimed or cancelled first by another instance
	}
	return 1, false, nil
}

// CancelAll cancels every live task of this Manager, whoever owns it,
// detached ones included, with cause ErrCanceled, and returns how many it
// signalled. WithReason says why, to every task it cancels. Unlike
// Shutdown it does not close the Manager. It is an administrator's call:
// Owner.CancelAll cancels one owner's tasks, and has the same shape.
// Errors: ErrClosed after Shutdown.
func (m *Manager) CancelAll(opts ...CancelOption) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	return m.cancelAll(withReason(ErrCanceled, cancelReason(opts))), nil
}

// cancelAll cancels every live task of this Manager with cause
// (ErrCanceled when nil) and returns how many it signalled. A shared store
// calls it with ErrInstanceLost (store.Runtime.CancelAll) when this
// instance lost its registration, so that no task goes on writing what
// another instance has already reaped.
func (m *Manager) cancelAll(cause error) int {
	if cause == nil {
		cause = ErrCanceled
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

// cancelOwner cancels every live task of owner, detached ones included, with
// cause ErrCanceled and reason, and returns how many it signalled
// (Owner.CancelAll).
func (m *Manager) cancelOwner(owner, reason string) (int, error) {
	if !bgtype.ValidOwner(owner) {
		return 0, bgtype.ErrInvalidOwner
	}
	if m.closed.Load() {
		return 0, ErrClosed
	}
	var (
		n      int
		starts []*Task
	)
	cause := withReason(ErrCanceled, reason)
	m.mu.Lock()
	if os := m.owners[owner]; os != nil {
		for t := os.head; t != nil; t = t.ownerNext {
			var ok bool
			if ok, starts = m.signal(t, cause, starts); ok {
				n++
			}
		}
	}
	m.mu.Unlock()
	m.startAll(starts)
	return n, nil
}

// CancelRun is m.Owner(owner).CancelRun(runID): it cancels the owner's run
// of that id, and no other owner's run of the same id.
func (m *Manager) CancelRun(owner, runID string, opts ...CancelOption) (int, error) {
	return m.Owner(owner).CancelRun(runID, opts...)
}

// cancelRun cancels the run key: it marks it cancelled, then signals every
// attached task of the run and their attached descendants with cause
// ErrCanceled (run). It returns how many live tasks it signalled, and whether
// the run was already cancelled before. Its cost is the size of the run's
// trees.
func (m *Manager) cancelRun(key runKey, reason string) (n int, already bool) {
	var starts []*Task
	m.mu.Lock()
	rs := m.runs[key]
	if rs == nil {
		rs = &runState{}
		m.runs[key] = rs
	}
	already = rs.canceled
	if !rs.canceled {
		rs.canceled = true
		if rs.live == 0 {
			m.retireRun(key, rs)
		}
	}
	for t := rs.head; t != nil; t = t.runNext {
		var k int
		cause := withReason(errRunCanceled, reason)
		k, starts = m.cancelSubtree(t, cause, cause, starts)
		n += k
	}
	m.mu.Unlock()
	m.startAll(starts)
	return n, already
}

// cancelRunElsewhere stops the owner's run runID on the other instances
// and returns how many of its live attached tasks there it cancelled. It
// lists them first (so that the count holds those cancelled at once),
// then records the stop for the instance that holds the run open, if
// another one (requestRunCancel), which cancels its tasks of the run as
// its run's: so a foreground call there waiting on one of them ends as a
// stop's (decision 803), never as a cancel of the task alone that came
// first. Those are counted, not asked for; each task on any other
// instance is asked to cancel, with its attached descendants. With a
// Store that is not shared every task runs here: it only records the stop.
func (m *Manager) cancelRunElsewhere(ctx context.Context, owner, runID, reason string) (int, error) {
	type elsewhere struct{ id, instance string }
	var tasks []elsewhere
	shared, ok := m.store.(store.SharedStore)
	if ok {
		for meta, err := range shared.List(ctx, owner, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput) {
			if err != nil {
				return 0, fmt.Errorf("bgtask: cancel run %q on other instances: %w", runID, err)
			}
			if meta.Parent.RunID == runID && !meta.Detached && meta.Instance != m.cfg.instance {
				tasks = append(tasks, elsewhere{meta.ID, meta.Instance})
			}
		}
	}
	holder, err := m.requestRunCancel(ctx, owner, runID, reason)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range tasks {
		if holder == "" || t.instance != holder {
			if err := shared.RequestCancel(ctx, t.id, true, reason); err != nil {
				return n, fmt.Errorf("bgtask: cancel run %q: task %s on another instance: %w", runID, t.id, err)
			}
		}
		n++
	}
	return n, nil
}

// cancelTree cancels t and its attached descendants, as CancelTree does, and
// returns how many it signalled and whether t had been signalled before. It
// is for a caller that holds t already (a tool's current task), so no
// lookup by id and no owner check is needed.
func (m *Manager) cancelTree(t *Task, reason string) (n int, before bool) {
	m.mu.Lock()
	before = t.signaled
	n, starts := m.cancelSubtree(t, withReason(ErrCanceled, reason), withReason(errParentCanceled, reason), nil)
	m.mu.Unlock()
	m.startAll(starts)
	return n, before
}

// cancelRequested carries out a cancel request that a store received for
// a task this Manager may run (another process asked for it): Cancel, or
// CancelTree when tree is true, with reason as the cancel reason ("" for
// none). An unknown task is not an error: it returns 0 and nil
// (store.Runtime.CancelRequested).
func (m *Manager) cancelRequested(ctx context.Context, id string, tree bool, reason string) (int, error) {
	var opts []CancelOption
	if reason != "" {
		opts = append(opts, WithReason(reason))
	}
	cancel := m.Cancel
	if tree {
		cancel = m.CancelTree
	}
	n, err := cancel(ctx, id, opts...)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return n, err
}
