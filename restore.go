package bgtask

import (
	"context"
	"errors"
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
// Then it announces, once, what ended but its owner's loop never took: every
// terminal record of owner that is not announced (see Owner.MarkAnnounced),
// is not silent, and whose terminal event this Manager has not delivered
// itself, oldest first. With the default MemoryStore there is none.
//
// A record that cannot be decoded is logged and skipped: the others are
// restored, and Restore returns an error matching ErrCorrupt that names it
// (RunStart goes on after such an error). Other errors: ErrInvalidOwner,
// ErrClosed, or the Store's. Records committed before an error stay
// interrupted, with their events sent.
func (m *Manager) Restore(ctx context.Context, owner string) ([]TaskMeta, error) {
	switch {
	case !validOwner(owner):
		return nil, ErrInvalidOwner
	case m.closed.Load():
		return nil, ErrClosed
	}
	m.restoreMu.Lock() // two Restores must not both report one record
	defer m.restoreMu.Unlock()
	var (
		done    []TaskMeta
		corrupt []error // reported and skipped records: they block none of the others
	)
	// An interrupted task will never tell the tasks it owned as an agent
	// (a sub-agent's) to anyone: restore them too, reporting to owner
	// (decision 5 forwards a gone sub-agent's events to its owner the same way).
	for queue := []string{owner}; len(queue) > 0; queue = queue[1:] {
		got, bad, err := m.restoreOwner(ctx, queue[0], owner)
		done = append(done, got...)
		if bad != nil {
			corrupt = append(corrupt, bad)
		}
		if err != nil {
			return done, err
		}
		for _, meta := range got {
			queue = append(queue, meta.ID) // the tasks it owned, if it was an agent
		}
		// Then what ended before, but its owner's loop never took: a crash
		// between the end of a task and the next step boundary, or a
		// record a recovery at open interrupted.
		ann, err := m.reannounce(ctx, queue[0], owner)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return done, err
		}
		if err != nil {
			corrupt = append(corrupt, err)
		}
		for _, meta := range ann {
			if meta.Status == StatusInterrupted {
				queue = append(queue, meta.ID) // a gone agent: nobody else will tell its tasks
			}
		}
	}
	if len(corrupt) > 0 {
		return done, fmt.Errorf("bgtask: restore skipped corrupt records: %w", errors.Join(corrupt...))
	}
	return done, nil
}

// restoreOwner interrupts the stale records of one owner and reports each to
// report, in creation order. corrupt names the records it skipped.
func (m *Manager) restoreOwner(ctx context.Context, owner, report string) (done []TaskMeta, corrupt, err error) {
	_, shared := m.store.(SharedStore)
	var stale []TaskMeta
	for meta, err := range m.store.List(ctx, owner, StatusQueued, StatusRunning, StatusAwaitingInput) {
		switch {
		case err != nil && errors.Is(err, ErrCorrupt):
			corrupt = err
			m.log.Error("bgtask: restore skips corrupt records", "owner", owner, "err", err)
		case err != nil:
			return nil, corrupt, err
		case shared && meta.Instance != m.cfg.instance:
			// another instance's: its reaper's job, not ours
		default:
			stale = append(stale, meta)
		}
	}
	done, err = m.interrupt(ctx, owner, report, stale)
	return done, corrupt, err
}

// interrupt makes the stale records of owner interrupted, one commit each,
// and reports each to report, in the given (creation) order.
func (m *Manager) interrupt(ctx context.Context, owner, report string, stale []TaskMeta) ([]TaskMeta, error) {
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
		meta = Interrupted(meta, at)
		actions := []Action{Upsert(meta)}
		if owner != report { // forwarded: the gone agent will never take it
			actions = append(actions, Announce(meta.ID))
		}
		if err := m.store.Commit(ctx, owner, actions...); err != nil {
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
			m.noteDelivered(got.ID)
			_ = m.deliver(report, terminalEvent(&got))
		}
		done = append(done, got)
	}
	return done, nil
}
