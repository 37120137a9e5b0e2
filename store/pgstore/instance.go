package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// ErrStarted is returned by a second Start: a Store serves one instance.
var ErrStarted = errors.New("pgstore: store already started")

// Start registers m's runtime instance (rt.Instance()) as alive and starts,
// in goroutines that Close stops and waits for, its heartbeat, the reaper
// and the cancel listener and poller. m must use this Store (WithStore).
// An instance id that was declared dead or stopped before is registered
// afresh: use Manager.Restore at run start for the tasks it left.
//
// From Start on, every write is fenced: see Commit.
//
// Start returns ErrStarted if called twice, ErrClosed after Close, and the
// database's error if the registration fails (nothing then runs).
func (s *Store) Start(ctx context.Context, rt store.Runtime) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.started:
		return ErrStarted
	}
	id := rt.Instance()
	sent := s.elapsed()
	if _, err := s.bg.Exec(ctx, `INSERT INTO bgtask_instances (id, heartbeat_at, started_at, state)
		VALUES ($1, now(), now(), 'alive')
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), started_at = now(), state = 'alive'`, id); err != nil {
		return fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	s.lastBeat.Store(int64(sent))
	s.started, s.rt = true, rt
	s.instance.Store(&id)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	wake := make(chan struct{}, 1)
	s.wg.Go(func() { s.heartbeatLoop(bg, rt, id) })
	s.wg.Go(func() { s.reaperLoop(bg) })
	s.wg.Go(func() { s.listenLoop(bg, id, wake) })
	s.wg.Go(func() { s.pollLoop(bg, rt, id, wake) })
	return nil
}

// elapsed reads the Store's clock, relative to when it was opened.
func (s *Store) elapsed() time.Duration { return s.clock().Sub(s.base) }

// fenceAge is how old the last successful heartbeat may be before this
// instance refuses to write: the grace less a tenth of it. The heartbeat's
// age is counted from when it was sent, by this process's monotonic clock,
// and the database stamps it later, so this instance stops writing before
// any reaper can find its heartbeat older than the grace; the tenth covers
// the time a write already checked takes to reach the database, and clocks
// that run at slightly different rates.
func (s *Store) fenceAge() time.Duration { return s.cfg.grace - s.cfg.grace/10 }

// heartbeatLoop stamps the instance's heartbeat every interval. The
// instance is lost when it finds itself declared dead, when no stamp
// succeeded within fenceAge counted from when the last good one was sent,
// or when a write found it so first; it then cancels the Manager's tasks.
func (s *Store) heartbeatLoop(ctx context.Context, rt store.Runtime, id string) {
	t := time.NewTicker(s.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.lostWake:
			s.cancelTasks(rt, id)
			return
		case <-t.C:
		}
		if s.lost.Load() {
			s.cancelTasks(rt, id)
			return
		}
		sent := s.elapsed()
		hctx, cancel := context.WithTimeout(ctx, s.cfg.heartbeat)
		tag, err := s.bg.Exec(hctx, `UPDATE bgtask_instances SET heartbeat_at = now() WHERE id = $1 AND state = 'alive'`, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && tag.RowsAffected() == 1:
			s.noteBeat(sent)
			continue
		case err == nil:
			s.markLost(id, "it was declared dead by a reaper")
			s.cancelTasks(rt, id)
			return
		}
		s.log.Warn("pgstore: heartbeat failed", "instance", id, "err", err)
		if err := s.checkFence(); err != nil {
			s.cancelTasks(rt, id)
			return
		}
	}
}

// noteBeat records a successful heartbeat sent at sent (never moving
// lastBeat back: heartbeats may finish out of order after a timeout).
func (s *Store) noteBeat(sent time.Duration) {
	for {
		old := s.lastBeat.Load()
		if int64(sent) <= old || s.lastBeat.CompareAndSwap(old, int64(sent)) {
			return
		}
	}
}

// checkFence returns ErrInstanceLost, and marks the instance lost, when
// the started instance may no longer write: it was lost before, or its
// last successful heartbeat was sent fenceAge ago or longer. It returns
// nil on a Store that was not started. It does not touch the database.
func (s *Store) checkFence() error {
	id := s.instance.Load()
	switch {
	case id == nil:
		return nil
	case s.lost.Load():
		return ErrInstanceLost
	}
	age := s.elapsed() - time.Duration(s.lastBeat.Load())
	if age < s.fenceAge() {
		return nil
	}
	why := fmt.Sprintf("no heartbeat succeeded for %v (writes stop at %v, the grace %v less a tenth)", age.Round(time.Millisecond), s.fenceAge(), s.cfg.grace)
	s.markLost(*id, why)
	return fmt.Errorf("%w: %s", ErrInstanceLost, why)
}

// fenceSQL locks the started instance's row against being declared dead
// (a reaper's FOR UPDATE waits for, or skips, it) until the transaction
// ends, and reads its state. FOR KEY SHARE does not block the heartbeat,
// which updates a non-key column.
const fenceSQL = `SELECT state FROM bgtask_instances WHERE id = $1 FOR KEY SHARE`

// queueFence adds fenceSQL to b when the Store was started, and returns
// the function that checks its result; nil when there is nothing to check.
func (s *Store) queueFence(b *pgx.Batch) func(pgx.BatchResults) error {
	id := s.instance.Load()
	if id == nil {
		return nil
	}
	b.Queue(fenceSQL, *id)
	return func(br pgx.BatchResults) error {
		var state string
		err := br.QueryRow().Scan(&state)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			state = "missing"
		case err != nil:
			return fmt.Errorf("pgstore: fence: %w", err)
		}
		if state == "alive" {
			return nil
		}
		why := fmt.Sprintf("its registration is %s", state)
		s.markLost(*id, why)
		return fmt.Errorf("%w: %s", ErrInstanceLost, why)
	}
}

// markLost makes every later write fail and wakes the heartbeat loop to
// cancel the Manager's tasks. It does not call the Manager: a write that
// finds the instance lost may run under the Manager's locks.
func (s *Store) markLost(id, why string) {
	if !s.lost.CompareAndSwap(false, true) {
		return
	}
	s.log.Error("pgstore: runtime instance lost its registration; writes refused", "instance", id, "reason", why)
	select {
	case s.lostWake <- struct{}{}:
	default:
	}
}

// cancelTasks cancels the Manager's tasks once the instance is lost.
func (s *Store) cancelTasks(rt store.Runtime, id string) {
	n := rt.CancelAll(bgtype.ErrInstanceLost)
	s.log.Error("pgstore: tasks of a lost runtime instance cancelled", "instance", id, "cancelled", n)
}

// Lost reports whether the started instance lost its registration (see
// ErrInstanceLost).
func (s *Store) Lost() bool { return s.lost.Load() }
