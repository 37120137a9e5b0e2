package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// Restore reconciles the owner's records after a restart: every
// record that is still queued or running but that this Manager does not run
// (a process that is gone ran it, or its end could not be committed) becomes
// interrupted, fenced on a new attempt so that a late write from the old
// runner changes nothing, and the owner gets an EventInterrupted for each,
// in creation order. Closures are never re-run. It returns the records it
// interrupted. The tasks that an interrupted task owned (a sub-agent's) are
// restored the same way, after it, and reported to owner: the sub-agent
// will never hear of them. Their records are marked announced, under their
// own owner, only when owner's loop takes their events
// (Owner.MarkAnnounced), so a crash before that reports them again.
//
// An agent loop calls it at run start. With a SharedStore, only records of
// this Manager's own instance are considered: interrupting what another live
// process runs would be wrong, and the store's reaper does that job for
// processes whose heartbeat stopped. With a Store that tells whether an
// instance still runs (InstanceLiveness), a record of another instance is
// interrupted only once that instance is gone.
//
// Then it announces, once, what ended but its owner's loop never took: every
// terminal record of owner that is not announced (see Owner.MarkAnnounced),
// is not silent, and whose terminal event this Manager has not delivered
// itself, oldest first. With the default in-memory store there is none.
//
// A record that cannot be decoded is logged and skipped: the others are
// restored, and Restore returns an error matching ErrCorrupt that names it
// (RunStart goes on after such an error). Other errors: ErrInvalidArgument (blank owner),
// ErrClosed, or the Store's. Records committed before an error stay
// interrupted, with their events sent.
func (m *Manager) Restore(ctx context.Context, owner string) ([]bgtype.TaskMeta, error) {
	switch {
	case !bgtype.ValidOwner(owner):
		return nil, bgtype.ErrInvalidOwner
	case m.closed.Load():
		return nil, ErrClosed
	}
	return m.restoreTree(ctx, []string{owner}, owner)
}

// restoreTree restores the records of the owners in queue, and of every
// gone agent among their tasks, reporting each to report. Restore starts
// it at its owner; a Receiver starts it at the sub-agents a store's notice
// said are gone (their tasks that ended unannounced were never told).
func (m *Manager) restoreTree(ctx context.Context, queue []string, report string) ([]bgtype.TaskMeta, error) {
	m.restoreMu.Lock() // two Restores must not both report one record
	done, err := m.restoreTreeLocked(ctx, queue, report)
	observed := m.restoreObserved
	m.restoreObserved = nil
	m.restoreMu.Unlock()
	for i := range observed { // no lock held: the observer may call the Manager, Restore included
		m.observe(observed[i])
	}
	return done, err
}

// restoreTreeLocked is restoreTree with restoreMu held.
func (m *Manager) restoreTreeLocked(ctx context.Context, queue []string, report string) ([]bgtype.TaskMeta, error) {
	var (
		done    []bgtype.TaskMeta
		corrupt []error // reported and skipped records: they block none of the others
	)
	// An interrupted task will never tell the tasks it owned as an agent
	// (a sub-agent's) to anyone: restore them too, reporting to report
	// (decision 5 forwards a gone sub-agent's events to its owner the same way).
	seen := make(map[string]bool, len(queue))
	for ; len(queue) > 0; queue = queue[1:] {
		if seen[queue[0]] {
			continue // a lineage that loops (corrupt records)
		}
		seen[queue[0]] = true
		got, bad, err := m.restoreOwner(ctx, queue[0], report)
		done = append(done, got...)
		if bad != nil {
			corrupt = append(corrupt, bad)
		}
		if err != nil {
			return done, err
		}
		next, err := m.pendingOwners(ctx, got) // the tasks it owned, if it was an agent
		if err != nil {
			return done, err
		}
		queue = append(queue, next...)
		// Then what ended before, but its owner's loop never took: a crash
		// between the end of a task and the next step boundary, or a
		// record a recovery at open interrupted.
		ann, err := m.reannounce(ctx, queue[0], report)
		if err != nil && !errors.Is(err, bgtype.ErrCorrupt) {
			return done, err
		}
		if err != nil {
			corrupt = append(corrupt, err)
		}
		for _, meta := range ann {
			if meta.Status == bgtype.StatusInterrupted {
				queue = append(queue, meta.ID) // a gone agent: nobody else will tell its tasks
			}
		}
		// A sub-agent that ended (its end told already, or silent) may
		// still own ends nobody took: they reached its inbox after its loop
		// last drained it and were lost with the process.
		ended, err := m.endedAgents(ctx, queue[0], func(id string) bool { return seen[id] || slices.Contains(queue, id) })
		if err != nil {
			return done, err
		}
		queue = append(queue, ended...)
	}
	if len(corrupt) > 0 {
		return done, fmt.Errorf("bgtask: restore skipped corrupt records: %w", errors.Join(corrupt...))
	}
	return done, nil
}

// restoreOwner interrupts the stale records of one owner and reports each to
// report, in creation order. corrupt names the records it skipped.
func (m *Manager) restoreOwner(ctx context.Context, owner, report string) (done []bgtype.TaskMeta, corrupt, err error) {
	_, shared := m.store.(store.SharedStore)
	live, _ := m.store.(store.InstanceLiveness)
	known := make(map[string]bool)
	var stale []bgtype.TaskMeta
	for meta, err := range m.store.List(ctx, owner, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput) {
		switch {
		case err != nil && errors.Is(err, bgtype.ErrCorrupt):
			corrupt = err
			m.log.Error("bgtask: restore skips corrupt records", "owner", owner, "err", err)
		case err != nil:
			return nil, corrupt, err
		case shared && meta.Instance != m.cfg.instance:
			// another instance's: its reaper's job, not ours
		case store.Waiting(&meta) || m.claims.has(meta.ID):
			// a resumable task waiting for a claim, or being claimed here: no instance's death concerns it
		default:
			alive, err := m.aliveElsewhere(ctx, live, known, &meta)
			if err != nil {
				return nil, corrupt, fmt.Errorf("bgtask: restore: is instance %q alive: %w", meta.Instance, err)
			}
			if !alive { // another instance's that still runs: its process ends it
				stale = append(stale, meta)
			}
		}
	}
	done, err = m.interrupt(ctx, owner, report, stale)
	return done, corrupt, err
}

// interrupt makes the stale records of owner interrupted, in batches, and
// reports each to report, in the given (creation) order.
func (m *Manager) interrupt(ctx context.Context, owner, report string, stale []bgtype.TaskMeta) ([]bgtype.TaskMeta, error) {
	if len(stale) == 0 {
		return nil, nil
	}
	done := make([]bgtype.TaskMeta, 0, len(stale))
	at := clock.Now()
	for len(stale) > 0 {
		n := min(len(stale), restoreBatch)
		got, err := m.restoreBatch(ctx, owner, report, stale[:n], at)
		done = append(done, got...)
		if err != nil {
			return done, err
		}
		stale = stale[n:]
	}
	return done, nil
}

// restoreBatch is how many records Restore commits at once: one Commit and
// one read back per batch instead of per record.
const restoreBatch = 500

// restoreBatch interrupts the records of batch (stale records of owner, in
// creation order) that this Manager does not run, in one Commit, reads
// back which of them it won, and reports those to report. It changes the
// records of batch in place.
func (m *Manager) restoreBatch(ctx context.Context, owner, report string, batch []bgtype.TaskMeta, at time.Time) ([]bgtype.TaskMeta, error) {
	m.mu.Lock()
	kept := batch[:0]
	for _, meta := range batch {
		if t := m.nodes[meta.ID]; t != nil && t.phase.live() {
			continue // it runs here
		}
		kept = append(kept, meta)
	}
	m.mu.Unlock()
	if len(kept) == 0 {
		return nil, nil
	}
	from := make(map[string]bgtype.Status, len(kept))
	actions := make([]store.Action, len(kept))
	for i := range kept {
		from[kept[i].ID] = kept[i].Status
		kept[i] = store.Orphaned(kept[i], at) // a resumable task with attempts left is requeued, and not reported
		actions[i] = store.Action{Op: store.OpUpsert, Tasks: kept[i : i+1 : i+1]}
	}
	if err := m.store.Commit(ctx, owner, actions...); err != nil {
		if len(kept) == 1 {
			return nil, fmt.Errorf("bgtask: restore %s: %w", kept[0].ID, err)
		}
		return nil, fmt.Errorf("bgtask: restore %s and %d more: %w", kept[0].ID, len(kept)-1, err)
	}
	won, err := m.restoredRecords(ctx, owner, kept)
	if err != nil {
		return nil, err
	}
	var done []bgtype.TaskMeta
	for i := range kept {
		got, ok := won[kept[i].ID]
		if !ok {
			continue // it ended meanwhile: its own record won
		}
		m.notifyLater(from[got.ID], &got) // restoreMu is held: observed once it is released
		m.counters.interrupted.Add(1)
		if got.Wake != bgtype.WakeSilent {
			m.noteDelivered(report, owner, got.ID)
			_ = m.deliver(report, terminalEvent(&got))
		}
		done = append(done, got)
	}
	return done, nil
}

// restoredRecords reads back the records of owner that the Commit of
// interrupted (fenced on their new Attempt) won, by id: one List of the
// owner's interrupted records, and a Get for each record not in it.
func (m *Manager) restoredRecords(ctx context.Context, owner string, interrupted []bgtype.TaskMeta) (map[string]bgtype.TaskMeta, error) {
	want := make(map[string]int64, len(interrupted))
	for i := range interrupted {
		want[interrupted[i].ID] = interrupted[i].Attempt
	}
	won := make(map[string]bgtype.TaskMeta, len(interrupted))
	for got, err := range m.store.List(ctx, owner, bgtype.StatusInterrupted) {
		if err != nil {
			return nil, fmt.Errorf("bgtask: restore: read back: %w", err)
		}
		if a, ok := want[got.ID]; ok && got.Attempt == a {
			won[got.ID] = got
		}
	}
	for i := range interrupted {
		meta := &interrupted[i]
		if _, ok := won[meta.ID]; ok {
			continue
		}
		got, err := m.store.Get(ctx, meta.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			won[meta.ID] = *meta // ours, dropped by retention right after the Commit
		case err != nil:
			return nil, fmt.Errorf("bgtask: restore %s: %w", meta.ID, err)
		case got.Status == bgtype.StatusInterrupted && got.Attempt == meta.Attempt:
			won[meta.ID] = got
		}
	}
	return won, nil
}

// pendingOwners returns the ids of metas, in their order, that may own
// records Restore has work for: all of them, or those the store's
// PendingOwnerFinder names.
func (m *Manager) pendingOwners(ctx context.Context, metas []bgtype.TaskMeta) ([]string, error) {
	ids := make([]string, len(metas))
	for i := range metas {
		ids[i] = metas[i].ID
	}
	f, ok := m.store.(store.PendingOwnerFinder)
	if !ok || len(ids) == 0 {
		return ids, nil
	}
	live := make(map[string]bool)
	for chunk := range slices.Chunk(ids, restoreBatch) {
		owners, err := f.PendingOwners(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("bgtask: restore: find the tasks the interrupted ones owned: %w", err)
		}
		for _, o := range owners {
			live[o] = true
		}
	}
	return slices.DeleteFunc(ids, func(id string) bool { return !live[id] }), nil
}

// endedAgents returns the ids of owner's ended sub-agents that this
// Manager no longer holds (their inbox is closed and what reached it was
// forwarded) and that still own records Restore has work for, other than
// those known already reports (queued or done). Most owners have no ended sub-agent: the
// common cost is one List of the owner's terminal records.
func (m *Manager) endedAgents(ctx context.Context, owner string, known func(id string) bool) ([]string, error) {
	var ids []string
	for meta, err := range m.store.List(ctx, owner, bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted) {
		if err != nil {
			continue // a corrupt record: reannounce reported it
		}
		if meta.Type != bgtype.TypeSubAgent || known(meta.ID) || m.holds(meta.ID) {
			continue
		}
		ids = append(ids, meta.ID)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	f, ok := m.store.(store.PendingOwnerFinder)
	if !ok {
		return ids, nil
	}
	return f.PendingOwners(ctx, ids)
}

// holds reports whether the Manager still holds task id in its lineage
// index before its retirement: its inbox may still forward events.
func (m *Manager) holds(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.nodes[id]
	return t != nil && t.phase != phaseGone
}
