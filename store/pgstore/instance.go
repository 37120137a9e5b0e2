package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// ErrStarted is returned by a second Start: a Store serves one instance.
var ErrStarted = errors.New("pgstore: store already started")

// ErrInstanceRunning is matched by the error of a Start whose instance id
// another live process holds: two processes with one id would share
// fencing and leases. Give each process its own id.
var ErrInstanceRunning = errors.New("pgstore: instance already running")

// instanceLockWait is how long Start waits for the instance lock that
// another session holds: a process killed a moment ago keeps it until the
// server notices its connection closed, a live one keeps it for good.
const instanceLockWait = 2 * time.Second

// instanceLockSQL takes the session-level advisory lock of an instance id
// ($1), which the listening connection of the process that runs the
// instance holds while it lives; the server releases it when that
// connection closes, a process killed with it.
// $2 is the scope's lock prefix (scope.go).
const instanceLockSQL = `SELECT pg_advisory_lock(hashtextextended($2 || 'instance ' || $1, 0))`

// tryInstanceLockSQL is instanceLockSQL without the wait.
const tryInstanceLockSQL = `SELECT pg_try_advisory_lock(hashtextextended($2 || 'instance ' || $1, 0))`

// Start registers m's runtime instance (rt.Instance()) as alive and starts,
// in goroutines that Close stops and waits for, its heartbeat, the reaper
// and the cancel listener and poller. m must use this Store (WithStore).
// An instance id that was declared dead or stopped before is registered
// afresh: use Manager.Restore at run start for the tasks it left.
//
// From Start on, every write is fenced: see Commit.
//
// One live process per instance id in the schema (another schema's fleet
// may use the id too): the process that runs an instance
// holds a session-level advisory lock of its id on its listening
// connection, and Start refuses an id whose lock another session holds
// (waiting instanceLockWait for a process killed a moment ago to lose it),
// with an error matching ErrInstanceRunning. A process that died lost the
// lock with its connection, so a restart with its id (as after kill -9 or
// a deploy) registers at once. Each registration writes a random token on
// the instance's row; the heartbeat and Close touch the row only while it
// holds their token, so a process whose id another process registered
// since (its listening connection had dropped) finds itself lost at its
// next heartbeat and stops writing.
//
// Start returns ErrStarted if called twice, ErrClosed after Close, an
// error matching ErrInstanceRunning, and the database's error if the
// registration fails (nothing then runs).
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
	conn, err := s.lockInstance(ctx, id)
	if err != nil {
		return err
	}
	token := rand.Text()
	sent := s.elapsed()
	if _, err := s.bg.Exec(ctx, `INSERT INTO bgtask_instances (id, heartbeat_at, started_at, state, token)
		VALUES ($1, now(), now(), 'alive', $2)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), started_at = now(), state = 'alive', token = $2`, id, token); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	// The settled position starts here, before Start returns, so an end
	// committed after Start is caught up on (catchup.go).
	if err := s.catchUp(ctx, s.bg); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	s.token = token
	s.lastBeat.Store(int64(sent))
	s.started, s.rt = true, rt
	s.instance.Store(&id)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	wake := pollWake{all: make(chan struct{}, 1), msgs: make(chan struct{}, 1)}
	s.wg.Go(func() { s.heartbeatLoop(bg, rt, id) })
	s.wg.Go(func() { s.reaperLoop(bg) })
	s.wg.Go(func() { s.listenLoop(bg, id, conn, wake) })
	s.wg.Go(func() { s.pollLoop(bg, rt, id, wake) })
	return nil
}

// lockInstance opens the listening connection of instance id and takes
// the instance's lock on it, or returns an error matching
// ErrInstanceRunning when another session keeps it.
func (s *Store) lockInstance(ctx context.Context, id string) (*pgx.Conn, error) {
	conn, err := s.connectListener(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", instanceLockWait.Milliseconds()))
	if err == nil {
		_, err = conn.Exec(ctx, instanceLockSQL, id, s.scope.lock)
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "55P03": // lock_not_available
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: pgstore: instance %q is already running (registered by another live process): give each process its own instance id", ErrInstanceRunning, id)
	case err == nil:
		_, err = conn.Exec(ctx, "RESET lock_timeout")
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgstore: register instance %q: %w", id, err)
	}
	return conn, nil
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
		tag, err := s.bg.Exec(hctx, `UPDATE bgtask_instances SET heartbeat_at = now() WHERE id = $1 AND state = 'alive' AND token = $2`, id, s.token)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && tag.RowsAffected() == 1:
			s.noteBeat(sent)
			continue
		case err == nil:
			s.markLost(id, "it was declared dead by a reaper, or another process registered its id")
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
