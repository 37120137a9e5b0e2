package bgtask

import (
	"fmt"
	"slices"
)

// Concurrency limits are counters under m.mu rather than semaphores:
// admission has to be atomic with registration, and per-owner counters go
// away with the owner's last task (see docs/decisions.md).

// hasSlot reports whether a task of os may run now. Called with m.mu held.
func (m *Manager) hasSlot(os *ownerState) bool {
	return (m.cfg.limits.MaxConcurrent == 0 || m.running < m.cfg.limits.MaxConcurrent) &&
		(m.cfg.limits.MaxConcurrentPerOwner == 0 || os.running < m.cfg.limits.MaxConcurrentPerOwner)
}

// admit gives t a slot, queues it, or refuses it. Called with m.mu held.
func (m *Manager) admit(t *Task, os *ownerState) error {
	if m.hasSlot(os) {
		t.move(phaseAdmitted)
		m.running++
		os.running++
		return nil
	}
	if !m.cfg.limits.QueueWhenFull {
		// Neither text says how many tasks other owners run.
		if m.cfg.limits.MaxConcurrent > 0 && m.running >= m.cfg.limits.MaxConcurrent {
			return fmt.Errorf("%w (Limits.MaxConcurrent)", ErrLimit)
		}
		return fmt.Errorf("%w: %d of this owner's tasks running (Limits.MaxConcurrentPerOwner)", ErrLimit, os.running)
	}
	t.move(phaseWaiting)
	m.queue = append(m.queue, t)
	return nil
}

// release frees the slot of a task that held one and admits queued tasks
// in order, skipping those whose owner is still at its limit. It appends to
// starts the admitted tasks whose first record is committed (the spawner
// starts the others). Called with m.mu held.
func (m *Manager) release(os *ownerState, starts []*Task) []*Task {
	m.running--
	os.running--
	if len(m.queue) == 0 {
		return starts
	}
	kept := m.queue[:0]
	for _, q := range m.queue {
		qos := m.owners[q.rec.Owner]
		if !m.hasSlot(qos) {
			kept = append(kept, q)
			continue
		}
		m.running++
		qos.running++
		if q.phase == phaseQueued {
			q.move(phaseRunning)
			starts = append(starts, q)
		} else {
			q.move(phaseAdmitted) // phaseWaiting: the spawner starts it
		}
	}
	clear(m.queue[len(kept):])
	m.queue = kept
	return starts
}

// dequeue removes a queued task that was cancelled. Called with m.mu held.
func (m *Manager) dequeue(t *Task) {
	if i := slices.Index(m.queue, t); i >= 0 {
		m.queue = slices.Delete(m.queue, i, i+1)
	}
}

// startAll starts the goroutines of tasks admitted or cancelled while queued.
// Their WaitGroup count was taken when they registered.
func (m *Manager) startAll(starts []*Task) {
	for _, t := range starts {
		m.start(t)
	}
}
