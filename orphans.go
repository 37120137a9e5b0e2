package bgtask

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/store"
)

// InterruptOrphaned ends, for every owner, the records that a previous runtime
// instance left queued, running or awaiting input: they become
// interrupted, in batches, through the Store (see OrphanInterrupter). It is an
// administrator's call, reachable from no Owner view or tool; the durable
// stores run it by themselves when they open (a single-process store only
// when no other process has it open; a SharedStore's reaper for instances
// whose heartbeat stopped). Each owner hears of its interrupted tasks when
// its next run starts (Restore announces the records it never took).
//
// It returns how many records it interrupted: 0, and no error, with a
// Store that is not a OrphanInterrupter (the default in-memory store keeps no
// records of a previous instance). Errors: ErrClosed, or the Store's (a
// corrupt record is named, and the others are recovered).
func (m *Manager) InterruptOrphaned(ctx context.Context) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	r, ok := m.store.(store.OrphanInterrupter)
	if !ok {
		return 0, nil
	}
	n, err := r.InterruptOrphaned(ctx)
	if err != nil {
		return n, fmt.Errorf("bgtask: recover: %w", err)
	}
	if n > 0 {
		m.log.Info("bgtask: recovered records of gone runtime instances", "interrupted", n)
	}
	return n, nil
}
