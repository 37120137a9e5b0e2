package bgtask

import (
	"context"
	"fmt"
)

// Restore reconciles the owner's records after a restart (D11): every
// record that is still queued or running but that this Manager does not run
// (a process that is gone ran it, or its end could not be committed) becomes
// interrupted, fenced on a new attempt so that a late write from the old
// runner changes nothing, and the owner gets an EventInterrupted for each,
// in creation order. Closures are never re-run. It returns the records it
// interrupted.
//
// An agent loop calls it at run start. With a SharedStore, only records of
// this Manager's own instance are considered: interrupting what another live
// process runs would be wrong, and the store's reaper does that job for
// processes whose heartbeat stopped.
//
// Errors: ErrClosed, ErrInvalidOwner, or the Store's. Records committed
// before an error stay interrupted, with their events sent.
func (m *Manager) Restore(ctx context.Context, owner string) ([]TaskMeta, error) {
	switch {
	case m.closed.Load():
		return nil, ErrClosed
	case !validOwner(owner):
		return nil, ErrInvalidOwner
	}
	m.restoreMu.Lock() // two Restores must not both report one record
	defer m.restoreMu.Unlock()
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
		runsHere := t != nil && t.live
		m.mu.Unlock()
		if runsHere {
			continue
		}
		from := meta.Status
		meta.Status, meta.FinishedAt, meta.Attempt = StatusInterrupted, at, meta.Attempt+1
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
		m.deliverTerminal(&got)
		done = append(done, got)
	}
	return done, nil
}
