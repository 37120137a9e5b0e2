package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store"
)

// maxCarried caps the ends a closed run carries (CloseRun): an aborted
// run hands out at most one step's events; the ends past the cap are
// handed out again by the owner's next run, as after a crash.
const maxCarried = 1024

// openRunSQL takes owner's run for instance: a new row, or the row of a
// run the same instance left, of a run that was closed, or of an instance
// that is gone: not alive in bgtask_instances, or whose process no longer
// holds the instance's advisory lock (instanceLockSQL; a process killed a
// moment ago lost it with its connection, long before the reaper's
// grace). The lock is tried for the statement's transaction only. It
// returns no row while another live instance holds the owner's run.
//
// It returns the ends the row carried (a closed, aborted run's) if the
// process that wrote them still runs: the same registration (token) of an
// instance that is alive and whose lock is held. Otherwise that process
// is gone, and the conversation the ends were shown in may be gone with
// it: they are handed out again, as after a crash. prev reads the row in
// the statement's snapshot (a FOR UPDATE there would read the updated
// row): a concurrent OpenRun of another instance waits for the row, then
// finds it open and returns nothing.
const openRunSQL = `WITH prev AS (SELECT carried, carried_token, instance FROM bgtask_runs WHERE owner = $1)
	INSERT INTO bgtask_runs AS r (owner, run_id, instance) VALUES ($1, $2, $3)
	ON CONFLICT (owner) DO UPDATE SET run_id = excluded.run_id, instance = excluded.instance, opened_at = now(),
		open = true, carried = '{}', carried_token = '', cancel_reason = NULL
	WHERE NOT r.open OR r.instance = excluded.instance
		OR NOT EXISTS (SELECT 1 FROM bgtask_instances i WHERE i.id = r.instance AND i.state = 'alive')
		OR pg_try_advisory_xact_lock(hashtextextended($4 || 'instance ' || r.instance, 0))
	RETURNING coalesce((SELECT p.carried FROM prev p WHERE cardinality(p.carried) > 0 AND p.carried_token <> ''
		AND EXISTS (SELECT 1 FROM bgtask_instances i WHERE i.id = p.instance AND i.state = 'alive' AND i.token = p.carried_token)
		AND NOT pg_try_advisory_xact_lock(hashtextextended($4 || 'instance ' || p.instance, 0))), '{}')`

// OpenRun implements store.RunLeaser: it records run as owner's one open
// run, held by instance, in one statement, and returns the ends the
// owner's previous run carried (once: they are forgotten here). While
// another live instance holds a run of owner it returns an error matching
// store.ErrRunHeld and changes nothing. A run of an instance that stopped,
// was declared dead, or whose process is gone (its connection closed: a
// kill) is taken over. A started Store whose instance is lost returns
// ErrInstanceLost.
func (s *Store) OpenRun(ctx context.Context, owner, run, instance string) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return nil, err
	}
	var carried []string
	switch err := s.pool.QueryRow(ctx, openRunSQL, owner, run, instance, s.scope.lock).Scan(&carried); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("pgstore: open run %s: %w", run, store.ErrRunHeld)
	case err != nil:
		return nil, fmt.Errorf("pgstore: open run %s: %w", run, err)
	}
	if len(carried) == 0 {
		carried = nil
	}
	return carried, nil
}

// CloseRun implements store.RunLeaser: if instance holds owner's run as
// run, it deletes it, or, with ends carried (at most 1,024 are kept), keeps
// it closed with them for the owner's next OpenRun while this process
// runs (a Store not started keeps none: they are handed out again). Without carried, it
// also deletes the row instance left closed as run (its carried ends are
// to be handed out again: the Receiver was closed). It does nothing
// otherwise.
func (s *Store) CloseRun(ctx context.Context, owner, run, instance string, carried []string) error {
	if s.isClosed() {
		return ErrClosed
	}
	var err error
	if len(carried) == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM bgtask_runs WHERE owner = $1 AND run_id = $2 AND instance = $3`, owner, run, instance)
	} else {
		_, err = s.pool.Exec(ctx, `UPDATE bgtask_runs SET open = false, carried = $4, carried_token = $5, cancel_reason = NULL
			WHERE owner = $1 AND run_id = $2 AND instance = $3 AND open`, owner, run, instance, carried[:min(len(carried), maxCarried)], s.token)
	}
	if err != nil {
		return fmt.Errorf("pgstore: close run %s: %w", run, err)
	}
	return nil
}

// HeldRun implements store.RunLeaser: it returns the run of owner that is
// open in the fleet (RunStart recorded it through OpenRun, RunEnd has not
// released it yet) and the instance that holds it, or two empty strings
// when no live instance holds one. It lets a host act on a thread's open
// run from any instance (bgtask.Owner.StopRun does). Safe for concurrent
// use.
func (s *Store) HeldRun(ctx context.Context, owner string) (run, instance string, err error) {
	if s.isClosed() {
		return "", "", ErrClosed
	}
	err = s.pool.QueryRow(ctx, `SELECT r.run_id, r.instance FROM bgtask_runs r
		JOIN bgtask_instances i ON i.id = r.instance AND i.state = 'alive' WHERE r.owner = $1 AND r.open`, owner).Scan(&run, &instance)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("pgstore: the open run of %q: %w", owner, err)
	}
	return run, instance, nil
}

// requestRunCancelSQL records a stop ($3, the reason) on owner's ($1) open
// run $2 if a live instance other than $4 holds it, and notifies that
// instance on the cancel channel ($5) when the transaction commits.
const requestRunCancelSQL = `WITH r AS (
		UPDATE bgtask_runs r SET cancel_reason = $3
		FROM bgtask_instances i
		WHERE r.owner = $1 AND r.run_id = $2 AND r.open AND r.instance <> $4
			AND i.id = r.instance AND i.state = 'alive'
		RETURNING r.instance)
	SELECT instance, pg_notify($5, instance) FROM r`

// RequestRunCancel implements store.RunLeaser: it records the stop on
// owner's open run run, held by a live instance other than from, and
// tells that instance (NOTIFY, and its poller as the fallback), whose
// runtime then cancels the run (store.RunCancelHandler). It returns that
// instance, "" when no other live instance holds run open.
func (s *Store) RequestRunCancel(ctx context.Context, owner, run, reason, from string) (string, error) {
	if s.isClosed() {
		return "", ErrClosed
	}
	var instance string
	switch err := s.pool.QueryRow(ctx, requestRunCancelSQL, owner, run, reason, from, s.scope.cancel).Scan(&instance, nil); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("pgstore: cancel run %s: %w", run, err)
	}
	return instance, nil
}

// handleRunCancels takes the stops recorded on the runs instance id holds
// and hands each to rt, if it carries them out (store.RunCancelHandler).
// A stop is cleared before it is handed over: a crash in between loses
// it, as the process that would end the run is gone with it.
func (s *Store) handleRunCancels(ctx context.Context, rt store.Runtime, id string) error {
	h, ok := rt.(store.RunCancelHandler)
	if !ok {
		return nil
	}
	rs, err := s.bg.Query(ctx, `UPDATE bgtask_runs r SET cancel_reason = NULL
		FROM (SELECT owner, cancel_reason FROM bgtask_runs WHERE instance = $1 AND cancel_reason IS NOT NULL FOR UPDATE SKIP LOCKED) c
		WHERE r.owner = c.owner
		RETURNING r.owner, r.run_id, c.cancel_reason`, id)
	if err != nil {
		return err
	}
	type stop struct{ owner, run, reason string }
	var stops []stop
	for rs.Next() {
		var st stop
		if err := rs.Scan(&st.owner, &st.run, &st.reason); err != nil {
			rs.Close()
			return err
		}
		stops = append(stops, st)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	for _, st := range stops {
		h.RunCancelRequested(ctx, st.owner, st.run, st.reason)
	}
	return nil
}

var _ store.RunLeaser = (*Store)(nil)
