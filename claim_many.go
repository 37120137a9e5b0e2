package bgtask

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// claimMany claims in one step, through a store.KindClaimer, waiting
// records of the kinds this Manager runs, as many as its Limits leave
// room for, and starts their attempts here, side by side. The instances
// of a fleet claim different records (the store skips those another
// claim holds) instead of each trying every record in turn and losing
// most of them (decision 723). It returns the kinds it claims, which the
// record-by-record pass leaves to it; none when the Manager has a
// per-owner limit (the store cannot count by owner) or no room.
func (m *Manager) claimMany(ctx context.Context, bc store.KindClaimer) (started int, kinds map[string]int, err error) {
	if m.cfg.limits.MaxConcurrentPerOwner > 0 || m.closed.Load() {
		return 0, nil, nil
	}
	now := clock.Now()
	c := store.Claim{Instance: m.cfg.instance, Kinds: make(map[string]int, len(m.kinds)), Max: claimBatch, At: now}
	for name, k := range m.kinds {
		if l := k.maxRunning(); l == 0 || m.limiter() != nil { // a cap of this process only: claimOne waits for a slot
			c.Kinds[name] = l
		}
	}
	m.claims.batch.Lock() // against this Manager's cancels of waiting records (cancelWaiting)
	m.mu.Lock()
	if l := m.cfg.limits.MaxConcurrent; l > 0 {
		c.Max = min(c.Max, max(l-m.running, 0))
	}
	m.mu.Unlock()
	var claimed []bgtype.TaskMeta
	if c.Max > 0 && len(c.Kinds) > 0 {
		claimed, err = bc.ClaimTasks(ctx, c)
	}
	for i := range claimed {
		m.claims.add(claimed[i].ID) // claimed by this Manager alone: a cancel waits for its start
	}
	m.claims.batch.Unlock()
	if err != nil {
		return 0, c.Kinds, fmt.Errorf("bgtask: claim: %w", err)
	}
	// The attempts start side by side, so that the commits that start
	// them share transactions (the store groups concurrent commits).
	var (
		wg sync.WaitGroup
		mu sync.Mutex // guards started and err
	)
	for i := range claimed {
		got := &claimed[i]
		wg.Go(func() {
			defer m.claims.remove(got.ID)
			fn, decErr := m.kinds[got.Resume.Kind].resumeFunc(got)
			ok, serr := m.startClaimed(ctx, got, fn, decErr, now)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				started++
			}
			if serr != nil {
				err = errors.Join(err, fmt.Errorf("bgtask: claim %s: %w", got.ID, serr))
			}
		})
	}
	wg.Wait()
	return started, c.Kinds, err
}
