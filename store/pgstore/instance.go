package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask"
)

// ErrStarted is returned by a second Start: a Store serves one instance.
var ErrStarted = errors.New("pgstore: store already started")

// Start registers m's runtime instance (m.Instance()) as alive and starts,
// in goroutines that Close stops and waits for, its heartbeat, the reaper
// and the cancel listener and poller. m must use this Store (WithStore).
// An instance id that was declared dead or stopped before is registered
// afresh: use Manager.Restore at run start for the tasks it left.
//
// Start returns ErrStarted if called twice, ErrClosed after Close, and the
// database's error if the registration fails (nothing then runs).
func (s *Store) Start(ctx context.Context, m *bgtask.Manager) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.started:
		return ErrStarted
	}
	id := m.Instance()
	if _, err := s.pool.Exec(ctx, `INSERT INTO bgtask_instances (id, heartbeat_at, started_at, state)
		VALUES ($1, now(), now(), 'alive')
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), started_at = now(), state = 'alive'`, id); err != nil {
		return fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	s.started, s.instance = true, id
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	wake := make(chan struct{}, 1)
	s.wg.Go(func() { s.heartbeatLoop(bg, m, id) })
	s.wg.Go(func() { s.reaperLoop(bg) })
	s.wg.Go(func() { s.listenLoop(bg, id, wake) })
	s.wg.Go(func() { s.pollLoop(bg, m, id, wake) })
	return nil
}

// heartbeatLoop stamps the instance's heartbeat every interval. The
// instance is lost when it finds itself declared dead, or when no stamp
// succeeded within the grace period counted from when the last good one
// was sent (by then another reaper may have declared it dead).
func (s *Store) heartbeatLoop(ctx context.Context, m *bgtask.Manager, id string) {
	t := time.NewTicker(s.cfg.heartbeat)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		hctx, cancel := context.WithTimeout(ctx, s.cfg.heartbeat)
		tag, err := s.pool.Exec(hctx, `UPDATE bgtask_instances SET heartbeat_at = now() WHERE id = $1 AND state = 'alive'`, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && tag.RowsAffected() == 1:
			lastOK = sent
			continue
		case err == nil:
			s.loseInstance(m, id, "it was declared dead by a reaper")
			return
		}
		s.log.Warn("pgstore: heartbeat failed", "instance", id, "err", err)
		if time.Since(lastOK) >= s.cfg.grace {
			s.loseInstance(m, id, fmt.Sprintf("no heartbeat succeeded for %v", time.Since(lastOK).Round(time.Millisecond)))
			return
		}
	}
}

// loseInstance makes every later Commit fail and cancels the Manager's tasks.
func (s *Store) loseInstance(m *bgtask.Manager, id, why string) {
	s.lost.Store(true)
	n := m.CancelAll(bgtask.ErrInstanceLost)
	s.log.Error("pgstore: runtime instance lost its registration; writes refused, tasks cancelled",
		"instance", id, "reason", why, "cancelled", n)
}

// Lost reports whether the started instance lost its registration (see
// ErrInstanceLost).
func (s *Store) Lost() bool { return s.lost.Load() }
