package bgtask

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// How a Manager that registered kinds finds the resumable tasks waiting
// in a store.KindQueue: one helper goroutine claims those due at start,
// then every claimPoll, until the Manager begins to stop.
const (
	claimPoll  = time.Second
	claimBatch = 100
)

// kindClaims is the set of records this Manager is claiming (to run them,
// or to end them: a cancel between attempts, a kind nobody runs):
// committed as its own, not yet registered as tasks or ended. Restore
// leaves them alone.
type kindClaims struct {
	mu  sync.Mutex               // guards ids
	ids map[string]chan struct{} // closed when the claim is done
	// batch serializes a batch claim (claimMany, held until the records it
	// claimed are in ids) against the cancels of waiting records
	// (cancelWaiting, read-held while one decides): the store cannot tell
	// two writes of one instance apart, so this Manager orders them.
	batch sync.RWMutex
}

// add marks id as being claimed and returns true; false, with a channel
// closed once that claim is done, when it is already.
func (c *kindClaims) add(id string) (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if done, ok := c.ids[id]; ok {
		return done, false
	}
	if c.ids == nil {
		c.ids = make(map[string]chan struct{})
	}
	c.ids[id] = make(chan struct{})
	return nil, true
}

func (c *kindClaims) remove(id string) {
	c.mu.Lock()
	if done, ok := c.ids[id]; ok {
		close(done)
		delete(c.ids, id)
	}
	c.mu.Unlock()
}

func (c *kindClaims) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[id]
	return ok
}

// startClaims starts the helper that claims the waiting tasks of the
// registered kinds from q.
func (m *Manager) startClaims(q store.KindQueue) {
	m.startHelper(func() {
		for {
			if _, err := m.ClaimWaiting(context.Background()); err != nil {
				m.log.Warn("bgtask: claiming resumable tasks", "err", err)
			}
			timer := time.NewTimer(claimPoll)
			select {
			case <-m.drain:
				timer.Stop()
				return
			case <-timer.C:
			}
		}
	})
}

// ClaimWaiting claims, once each, the resumable tasks that wait in the
// Manager's store (a store.KindQueue) for an instance that registered
// their kind, and runs the next attempt of each here, from its last
// checkpoint; it returns how many it started. A task of a kind this
// Manager does not register is left to another instance until it waited
// longer than the longest UnclaimedAfter of the kinds this Manager
// registers; then it ends failed, with an error that names its kind, and
// its owner hears of it.
// A task whose spec no longer decodes fails at once. A Manager with kinds
// and such a store calls it by itself at start and every second; a host
// calls it to resume at once. It returns 0 and nil with any other store,
// and ErrClosed once Stop or Shutdown began.
func (m *Manager) ClaimWaiting(ctx context.Context) (int, error) {
	q, ok := m.store.(store.KindQueue)
	if !ok || m.mem != nil {
		return 0, nil
	}
	if m.closed.Load() {
		return 0, ErrClosed
	}
	var (
		started int
		err     error
		batched map[string]int // kinds claimMany claims: not one by one
	)
	if bc, ok := m.store.(store.KindClaimer); ok {
		started, batched, err = m.claimMany(ctx, bc)
	}
	waiting, werr := q.WaitingTasks(ctx, claimBatch)
	err = errors.Join(err, werr)
	var full map[string]bool // kinds at their MaxRunning: claimed in a later pass
	for i := range waiting {
		if m.closed.Load() {
			break
		}
		if _, ok := batched[waiting[i].Resume.Kind]; ok || full[waiting[i].Resume.Kind] {
			continue // claimed in batches (a later pass), or its kind is full
		}
		ok, cerr := m.claimOne(ctx, &waiting[i])
		if ok {
			started++
		}
		if errors.Is(cerr, errKindFull) {
			if full == nil {
				full = make(map[string]bool)
			}
			full[waiting[i].Resume.Kind], cerr = true, nil
		}
		err = errors.Join(err, cerr)
	}
	return started, err
}

// claimOne claims one waiting record and starts its attempt here; false
// when another instance claimed it first, or it is not ours to run.
func (m *Manager) claimOne(ctx context.Context, meta *bgtype.TaskMeta) (bool, error) {
	now := clock.Now()
	k := m.kinds[meta.Resume.Kind]
	unclaimed := ""
	if k == nil {
		// A kind nobody here runs: once it waited too long this Manager
		// claims it to end it, so of several that find it due (instances,
		// or passes of this one from older reads) one ends it and tells
		// its owner; the others lose the claim.
		if unclaimed = m.unclaimedWhy(meta, now); unclaimed == "" {
			return false, nil
		}
	}
	if meta.CancelReason != "" {
		return false, nil
	}
	// No batch claim of this Manager until this claim is written: the
	// store takes two claims of one instance and attempt as one, so a
	// batch that claimed the record meanwhile would start it too.
	m.claims.batch.RLock()
	if _, ok := m.claims.add(meta.ID); !ok {
		m.claims.batch.RUnlock()
		return false, nil // another goroutine of this Manager claims it
	}
	defer m.claims.remove(meta.ID)
	m.mu.Lock()
	t := m.nodes[meta.ID]
	room := m.claimRoom(meta.Owner)
	m.mu.Unlock()
	if t != nil {
		m.claims.batch.RUnlock()
		return false, nil // claimed from an older read, and running here already
	}
	if !room && k != nil {
		m.claims.batch.RUnlock()
		return false, nil // at this process's Limits: left to an instance with room
	}
	var (
		fn     Func
		decErr error
	)
	if k != nil {
		fn, decErr = k.resumeFunc(meta)
	}
	claim := *meta
	claim.Resume = meta.Resume.Clone()
	claim.Status, claim.Instance = bgtype.StatusRunning, m.cfg.instance
	claim.Resume.ResumedAt = now
	err := m.claimCommit(ctx, k, &claim) // k nil: no limit
	m.claims.batch.RUnlock()
	if err != nil {
		if errors.Is(err, errKindFull) {
			return false, err
		}
		return false, fmt.Errorf("bgtask: claim %s: %w", meta.ID, err)
	}
	got, err := m.store.Get(ctx, meta.ID)
	if err != nil {
		return false, fmt.Errorf("bgtask: claim %s: read back: %w", meta.ID, err)
	}
	if got.Status != bgtype.StatusRunning || got.Instance != m.cfg.instance || got.Attempt != meta.Attempt {
		return false, nil // another instance won, or a cancel ended it first
	}
	if unclaimed != "" {
		return false, m.endClaimed(ctx, &got, bgtype.StatusFailed, unclaimed, now)
	}
	return m.startClaimed(ctx, &got, fn, decErr, now)
}

// startClaimed starts here the attempt of got, a record this Manager
// claimed (running on its instance), with fn, the kind's function for it;
// decErr, its spec's decoding error, ends it failed at once instead.
func (m *Manager) startClaimed(ctx context.Context, got *bgtype.TaskMeta, fn Func, decErr error, now time.Time) (bool, error) {
	if decErr != nil { // it fails at once, without another attempt
		return false, m.endClaimed(ctx, got, bgtype.StatusFailed, decErr.Error(), now)
	}
	if _, _, err := m.spawnTask(ctx, got.Owner, fn, got.Type == bgtype.TypeSubAgent, []SpawnOption{func(c *spawnConfig) { c.adopt = got }}); err != nil {
		if errors.Is(err, ErrLimit) && !errors.Is(err, errDepthLimit) || errors.Is(err, ErrClosed) {
			// Its slot went meanwhile, or this Manager began to stop: back
			// to the queue, at no cost of an attempt.
			why := fmt.Sprintf("no room on instance %q (Limits)", m.cfg.instance)
			if errors.Is(err, ErrClosed) {
				why = m.stopWhy()
			}
			back := store.Requeued(*got, now, why, true)
			if err := m.store.Commit(ctx, back.Owner, store.UpsertAction(back)); err != nil {
				return false, fmt.Errorf("bgtask: claim %s: put back: %w", got.ID, err)
			}
			return false, nil
		}
		return false, m.endClaimed(ctx, got, bgtype.StatusFailed, fmt.Sprintf("bgtask: kind %s: attempt %d could not start: %v", got.Resume.Kind, got.Attempt, err), now)
	}
	return true, nil
}

// claimRoom reports whether a claimed task of owner would run at once
// here under Limits (MaxConcurrent, MaxConcurrentPerOwner): a Manager
// without room does not claim, so the task goes to an instance with room
// rather than waiting, or failing, here. Called with m.mu held.
func (m *Manager) claimRoom(owner string) bool {
	os := m.owners[owner]
	if os == nil {
		os = &ownerState{}
	}
	return m.hasSlot(os)
}

// endClaimed ends a record this Manager claimed but does not run.
func (m *Manager) endClaimed(ctx context.Context, meta *bgtype.TaskMeta, status bgtype.Status, why string, at time.Time) error {
	u := *meta
	u.Status, u.Error, u.ErrorKind, u.FinishedAt = status, why, bgtype.KindError, at
	_, err := m.commitEnd(ctx, &u, at)
	return err
}

// unclaimedWhy returns the error that ends a waiting record of a kind
// this Manager does not register, once it waited longer than the
// UnclaimedAfter of the kinds it does (the longest): no instance that
// could run it claimed it. "" while it may wait longer.
func (m *Manager) unclaimedWhy(meta *bgtype.TaskMeta, now time.Time) string {
	var limit time.Duration
	for _, k := range m.kinds {
		limit = max(limit, k.unclaimedAfter())
	}
	since := meta.Resume.QueuedAt
	if since.IsZero() {
		since = meta.CreatedAt
	}
	if now.Sub(since) < limit {
		return ""
	}
	return fmt.Sprintf("bgtask: no runtime registered kind %s: the task waited %s to be resumed", meta.Resume.Kind, now.Sub(since).Round(time.Second))
}

// commitEnd commits u, the end of a record this Manager does not run, and
// reports whether it landed; if it did, the owner is told, once. The
// delivery is noted before the commit, as a task's end is, so that a
// Restore meanwhile does not announce the record too; if the commit did
// not land (another write won), the note is taken back.
func (m *Manager) commitEnd(ctx context.Context, u *bgtype.TaskMeta, at time.Time) (bool, error) {
	tell := u.Wake != bgtype.WakeSilent
	if tell {
		m.noteDelivered(u.Owner, u.Owner, u.ID)
	}
	landed := false
	defer func() {
		if tell && !landed && m.durable() {
			m.sent.done(u.Owner, []string{u.ID})
		}
	}()
	if err := m.store.Commit(ctx, u.Owner, store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{*u}, At: at}); err != nil {
		return false, fmt.Errorf("bgtask: end %s: %w", u.ID, err)
	}
	got, err := m.store.Get(ctx, u.ID)
	if err != nil {
		return false, fmt.Errorf("bgtask: end %s: read back: %w", u.ID, err)
	}
	if got.Status != u.Status || got.Attempt != u.Attempt || got.Instance != u.Instance { // another end, or a claim, won
		return false, nil
	}
	landed = true
	m.counters.countEnd(got.Status)
	if tell {
		_ = m.deliver(got.Owner, terminalEvent(&got))
	}
	return true, nil
}

// stopWhy is the last error of a resumable task requeued by a stop.
func (m *Manager) stopWhy() string {
	return fmt.Sprintf("its runtime (instance %q) stopped for a deploy", m.cfg.instance)
}

// requeueEnd puts a resumable task back in the queue instead of ending
// it: its attempt wound down for a stop (yield) or Stop cut it. Its record
// becomes queued on a new attempt (every later write of this one is
// dropped), its owner hears nothing, and it leaves this Manager as an
// ended task does. The end is claimed already (by the task's goroutine or
// by Stop's cut); for a cut task, whose function may still run, its
// context is cancelled last, as end does.
func (m *Manager) requeueEnd(t *Task, why string, yield bool) {
	cut := t.end.Load() == endCut
	t.emitMu.Lock()
	t.ended = true
	busy := t.inputCommit()
	t.emitMu.Unlock()
	if busy != nil {
		<-busy
	}
	t.settleProgress()
	if ib := t.agentInbox(); ib != nil {
		ib.Close()
	}
	var u bgtype.TaskMeta
	m.readRecord(t, &u)
	from := u.Status
	u = store.Requeued(u.Clone(), clock.Now(), why, yield)
	if err := m.commitUpdate(t, &u); err != nil {
		m.log.Error("bgtask: a resumable task could not be requeued; recovery will", "task_id", u.ID, "err", err)
	} else {
		m.notify(from, &u)
	}
	m.mu.Lock()
	starts := m.unregister(t)
	m.mu.Unlock()
	m.startAll(starts)
	if !cut {
		t.stop(nil)
	}
	m.retire(t)
	if cut {
		t.stop(errStopCut)
	}
}
