package bgtask

import (
	"sync/atomic"

	"github.com/bgtask/bgtask/bgtype"
)

// Stats are the Manager's counters, for metrics. Counts since New, except
// Live, Queued and Running, which are the current values. They add up every
// owner's tasks: they are for the host, never for a model.
type Stats struct {
	Live    int // tasks registered and not ended: queued, running, or recording their end
	Queued  int // tasks waiting for a concurrency slot
	Running int // tasks holding a slot

	Spawned        uint64 // spawns whose first record was committed
	Completed      uint64
	Failed         uint64 // panics included
	Canceled       uint64
	Panicked       uint64
	Interrupted    uint64 // records found stale and interrupted by Restore, and tasks Stop cut
	CommitFailures uint64 // terminal records that could not be committed (see EventCommitFailed)
}

// counters are the cumulative Stats, updated without the Manager's lock.
type counters struct {
	spawned, completed, failed, canceled, panicked, interrupted, commitFailures atomic.Uint64
	recorders                                                                   atomic.Uint64 // goroutines started to record ends (endSmall); not in Stats
}

// Stats returns the Manager's counters. Safe to call at any time, also after
// Shutdown.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	s := Stats{Live: m.live, Queued: len(m.queue), Running: m.running}
	m.mu.Unlock()
	c := &m.counters
	s.Spawned, s.Completed, s.Failed = c.spawned.Load(), c.completed.Load(), c.failed.Load()
	s.Canceled, s.Panicked, s.CommitFailures = c.canceled.Load(), c.panicked.Load(), c.commitFailures.Load()
	s.Interrupted = c.interrupted.Load()
	return s
}

// countEnd counts a task's terminal status.
func (c *counters) countEnd(s bgtype.Status) {
	switch s {
	case bgtype.StatusCompleted:
		c.completed.Add(1)
	case bgtype.StatusFailed:
		c.failed.Add(1)
	case bgtype.StatusCanceled:
		c.canceled.Add(1)
	case bgtype.StatusInterrupted: // Manager.Stop cut it at its deadline
		c.interrupted.Add(1)
	}
}
