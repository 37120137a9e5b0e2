package bgtask

import (
	"context"
	"fmt"
)

// Restore reconciles the owner's records after a restart: every
// record that is still queued or running but that this Manager does not run
// (a process that is gone ran it, or its end could not be committed) becomes
// interrupted, fenced on a new attempt so that a late write from the old
// runner changes nothing, and the owner gets an EventInterrupted for each,
// in creation order. Closures are never re-run. It returns the records it
// interrupted. The tasks that an interrupted task owned (a sub-agent's) are
// restored the same way, after it, and reported to owner: the sub-agent
// will never hear of them.
//
// An agent loop calls it at run start. With a SharedStore, only records of
// this Manager's own instance are considered: interrupting what another live
// process runs would be wrong, and the store's reaper does that job for
// processes whose heartbeat stopped.
//
// Errors: ErrInvalidOwner, ErrClosed, or the Store's. Records committed
// before an error stay interrupted, with their events sent.
func (m *Manager) Restore(ctx context.Context, owner string) ([]TaskMeta, error) {
	switch {
	case !validOwner(owner):
		return nil, ErrInvalidOwner
	case m.closed.Load():
		return nil, ErrClosed
	}
	m.restoreMu.Lock() // two Restores must not both report one record
	defer m.restoreMu.Unlock()
	var done []TaskMeta
	// An interrupted task will never tell the tasks it owned as an agent
	// (a sub-agent's) to anyone: restore them too, reporting to owner
	// (decision 5 forwards a gone sub-agent's events to its owner the same way).
	for queue := []string{owner}; len(queue) > 0; queue = queue[1:] {
		got, err := m.restoreOwner(ctx, queue[0], owner)
		done = append(done, got...)
		if err != nil {
			return done, err
		}
		for _, meta := range got {
			queue = append(queue, meta.ID) // the tasks it owned, if it was an agent
		}
	}
	return done, nil
}

// restoreOwner interrupts the stale records of one owner and reports each to
// report, in creation order.
func (m *Manager) restoreOwner(ctx context.Context, owner, report string) ([]TaskMeta, error) {
	snap, err := m.store.Load(ctx, owner)
	if err != nil {
		return nil, err
	}
	_, shared := m.store.(SharedStore)
	stale := make([]TaskMeta, 0, len(snap.Tasks))
	for _, meta := range snap.Tasks {
		if shared && meta.Instance != m.cfg.instance {
			continue // another instance's: its reaper's job, not ours
		}
		if !meta.Status.IsTerminal() {
			stale = append(stale, meta)
		}
	}
	SortMetas(stale)
	var done []TaskMeta
	at := now()
	for _, meta := range stale {
		m.mu.Lock()
		t := m.nodes[meta.ID]
		runsHere := t != nil && t.phase.live()
		m.mu.Unlock()
		if runsHere {
			continue
		}
		from := meta.Status
		meta.Status, meta.FinishedAt, meta.Attempt = StatusInterrupted, at, meta.Attempt+1
		meta.ErrorKind = KindInterrupted
		meta.Error = fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) is gone; it will not be re-run", meta.Instance)
		if err := m.store.Commit(ctx, owner, Upsert(meta)); err != nil {
			return done, fmt.Errorf("bgtask: restore %s: %w", meta.ID, err)
		}
		got, err := m.store.Get(ctx, meta.ID)
		if err != nil {
			return done, fmt.Errorf("bgtask: restore %s: %w", meta.ID, err)
		}
		if got.Status != StatusInterrupted || got.Attempt != meta.Attempt {
			continue // it ended meanwhile: its own record won
		}
		m.notify(from, &got)
		m.counters.interrupted.Add(1)
		if got.Wake != WakeSilent {
			_ = m.deliver(report, terminalEvent(&got))
		}
		done = append(done, got)
	}
	return done, nil
}
