package bgtask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// errKindFull tells ClaimWaiting that a kind runs its MaxRunning already:
// its other waiting records are left for a later pass.
var errKindFull = errors.New("bgtask: kind at its MaxRunning")

// kindSlots holds the process limit of the kinds that declare MaxRunning,
// for a store that is not a store.KindLimiter: how many attempts of each
// run their function in this Manager.
type kindSlots struct {
	mu   sync.Mutex // guards n and free
	n    map[string]int
	free chan struct{} // closed, and replaced, when a slot frees
}

// take waits for a slot of kind (limit at once); an error when ctx ends first.
func (s *kindSlots) take(ctx context.Context, kind string, limit int) error {
	for {
		s.mu.Lock()
		if s.n[kind] < limit {
			if s.n == nil {
				s.n = make(map[string]int)
			}
			s.n[kind]++
			s.mu.Unlock()
			return nil
		}
		if s.free == nil {
			s.free = make(chan struct{})
		}
		free := s.free
		s.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// give frees a slot of kind.
func (s *kindSlots) give(kind string) {
	s.mu.Lock()
	s.n[kind]--
	if s.free != nil {
		close(s.free)
		s.free = nil
	}
	s.mu.Unlock()
}

// full reports whether kind runs limit attempts here.
func (s *kindSlots) full(kind string, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[kind] >= limit
}

// limiter returns the Manager's store as a store.KindLimiter, or nil:
// then a kind's MaxRunning is this process's limit.
func (m *Manager) limiter() store.KindLimiter {
	if m.mem != nil {
		return nil
	}
	l, _ := m.store.(store.KindLimiter)
	return l
}

// claimCommit commits claim, the record of a task of kind k as this
// Manager runs it: under the kind's MaxRunning if it has one
// (errKindFull when there is no room), counted across the fleet by a
// store.KindLimiter, else in this process.
func (m *Manager) claimCommit(ctx context.Context, k Runner, claim *bgtype.TaskMeta) error {
	limit := 0
	if k != nil {
		limit = k.maxRunning()
	}
	if limit == 0 {
		return m.store.Commit(ctx, claim.Owner, store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{*claim}, At: claim.Resume.ResumedAt})
	}
	if l := m.limiter(); l != nil {
		room, err := l.ClaimUnder(ctx, *claim, limit)
		if err == nil && !room {
			err = errKindFull
		}
		return err
	}
	if m.slots.full(claim.Resume.Kind, limit) {
		return errKindFull // the attempt's function takes the slot; this only spares a claim that would wait
	}
	return m.store.Commit(ctx, claim.Owner, store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{*claim}, At: claim.Resume.ResumedAt})
}

// spawnQueued spawns a task of a kind with a fleet-wide MaxRunning into
// the queue, then claims it here if the kind has room; otherwise it waits
// for an instance with room. It returns the task's id either way.
func (m *Manager) spawnQueued(ctx context.Context, owner string, fn Func, opts []SpawnOption) (string, error) {
	opts = append(opts, func(c *spawnConfig) { c.waiting = true })
	id, started, err := m.spawnTask(ctx, owner, fn, false, opts)
	if err != nil || !started {
		return id, err // or the owner's task with this idempotency key
	}
	got, err := m.store.Get(ctx, id)
	if err == nil && store.Waiting(&got) {
		_, err = m.claimOne(ctx, &got)
	}
	if err != nil && !errors.Is(err, errKindFull) {
		// It waits in the queue all the same: the claim loop retries.
		m.log.Warn("bgtask: a spawned resumable task could not be claimed at once", slog.String("task_id", id), slog.Any("err", err))
	}
	return id, nil
}

// kindSlot takes, for an attempt of a kind with a MaxRunning held in this
// process, a slot of the kind, waiting for one; it returns what frees it.
func (k *Kind[S, C]) kindSlot(ctx context.Context, m *Manager) (func(), error) {
	if k.cfg.MaxRunning == 0 || m.limiter() != nil {
		return func() {}, nil // no limit, or the store counts it across the fleet
	}
	if err := m.slots.take(ctx, k.name, k.cfg.MaxRunning); err != nil {
		return nil, fmt.Errorf("bgtask: kind %s: waiting for a slot (MaxRunning %d): %w", k.name, k.cfg.MaxRunning, err)
	}
	return func() { m.slots.give(k.name) }, nil
}
