package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store"
)

// openRunSQL takes owner's run for instance: a new row, or the row of a
// run the same instance left, or of an instance that is gone: not alive
// in bgtask_instances, or whose process no longer holds the instance's
// advisory lock (instanceLockSQL; a process killed a moment ago lost it
// with its connection, long before the reaper's grace). The lock is tried
// for the statement's transaction only. It returns no row while another
// live instance holds the owner's run.
const openRunSQL = `INSERT INTO bgtask_runs AS r (owner, run_id, instance) VALUES ($1, $2, $3)
	ON CONFLICT (owner) DO UPDATE SET run_id = excluded.run_id, instance = excluded.instance, opened_at = now()
	WHERE r.instance = excluded.instance
		OR NOT EXISTS (SELECT 1 FROM bgtask_instances i WHERE i.id = r.instance AND i.state = 'alive')
		OR pg_try_advisory_xact_lock(hashtextextended('bgtask instance ' || r.instance, 0))
	RETURNING run_id`

// OpenRun implements store.RunLeaser: it records run as owner's one open
// run, held by instance, in one statement. While another live instance
// holds a run of owner it returns an error matching store.ErrRunHeld and
// changes nothing. A run of an instance that stopped, was declared dead,
// or whose process is gone (its connection closed: a kill) is taken over. A started Store whose instance is lost returns
// ErrInstanceLost.
func (s *Store) OpenRun(ctx context.Context, owner, run, instance string) error {
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return err
	}
	var got string
	switch err := s.pool.QueryRow(ctx, openRunSQL, owner, run, instance).Scan(&got); {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: open run %s: %w", run, store.ErrRunHeld)
	case err != nil:
		return fmt.Errorf("pgstore: open run %s: %w", run, err)
	}
	return nil
}

// CloseRun implements store.RunLeaser: it deletes owner's run if instance
// holds it as run, and does nothing otherwise.
func (s *Store) CloseRun(ctx context.Context, owner, run, instance string) error {
	if s.isClosed() {
		return ErrClosed
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM bgtask_runs WHERE owner = $1 AND run_id = $2 AND instance = $3`, owner, run, instance); err != nil {
		return fmt.Errorf("pgstore: close run %s: %w", run, err)
	}
	return nil
}

// HeldRun returns the run of owner that is open in the fleet (RunStart
// recorded it through OpenRun, RunEnd has not released it yet) and the
// instance that holds it, or two empty strings when no live instance holds
// one. It lets a host act on a thread's open run from any instance: a
// user's stop that lands on another instance than the turn's cancels the
// run's tasks there with Owner.CancelRun. A run left by a release that
// failed reads as open until its instance's next run of owner replaces it.
// Safe for concurrent use.
func (s *Store) HeldRun(ctx context.Context, owner string) (run, instance string, err error) {
	if s.isClosed() {
		return "", "", ErrClosed
	}
	err = s.pool.QueryRow(ctx, `SELECT r.run_id, r.instance FROM bgtask_runs r
		JOIN bgtask_instances i ON i.id = r.instance AND i.state = 'alive' WHERE r.owner = $1`, owner).Scan(&run, &instance)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("pgstore: the open run of %q: %w", owner, err)
	}
	return run, instance, nil
}

var _ store.RunLeaser = (*Store)(nil)
