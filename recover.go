package bgtask

import (
	"context"
	"fmt"
	"time"
)

// Recoverer is a Store that can end, for every owner at once, the records
// that a runtime instance which is gone left queued, running or awaiting
// input. Manager.Recover uses it. A durable Store implements it when it can
// tell a gone instance from a live one: a single-process store by a lock
// that its process holds while it is open, a SharedStore by its reaper.
type Recoverer interface {
	// Recover makes every non-terminal record of every owner that a gone
	// runtime instance left interrupted (with Interrupted), in batches, and
	// returns how many it interrupted. A record of a live instance is never
	// touched. A corrupt record is skipped and named in the returned
	// error; the others are still recovered.
	Recover(ctx context.Context) (int, error)
}

// Interrupted returns the update that ends meta, a record whose runtime
// instance is gone, as interrupted at at: fenced on the next attempt, with
// the error kind KindInterrupted and an error naming the instance. Restore
// and every Recoverer use it, so an interrupted record reads the same
// whoever ended it.
func Interrupted(meta TaskMeta, at time.Time) TaskMeta {
	meta.Status, meta.FinishedAt, meta.Attempt = StatusInterrupted, at, meta.Attempt+1
	meta.ErrorKind = KindInterrupted
	meta.Error = fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) is gone; it will not be re-run", meta.Instance)
	meta.Input = nil
	return meta
}

// Recover ends, for every owner, the records that a previous runtime
// instance left queued, running or awaiting input: they become
// interrupted, in batches, through the Store (see Recoverer). It is an
// administrator's call, reachable from no Owner view or tool; the durable
// stores run it by themselves when they open (a single-process store only
// when no other process has it open; a SharedStore's reaper for instances
// whose heartbeat stopped). Each owner hears of its interrupted tasks when
// its next run starts (Restore announces the records it never took).
//
// It returns how many records it interrupted: 0, and no error, with a
// Store that is not a Recoverer (the default MemoryStore keeps no
// records of a previous instance). Errors: ErrClosed, or the Store's (a
// corrupt record is named, and the others are recovered).
func (m *Manager) Recover(ctx context.Context) (int, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	r, ok := m.store.(Recoverer)
	if !ok {
		return 0, nil
	}
	n, err := r.Recover(ctx)
	if err != nil {
		return n, fmt.Errorf("bgtask: recover: %w", err)
	}
	if n > 0 {
		m.log.Info("bgtask: recovered records of gone runtime instances", "interrupted", n)
	}
	return n, nil
}
