package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
)

// Per kind, claims serialize on a transaction-scoped advisory lock, so a
// count and the claim it admits are one step: READ COMMITTED gives each
// statement a fresh snapshot, and the lock is taken before the count, so
// the count sees every claim of the kind committed before it.
const (
	kindLockSQL    = `SELECT pg_advisory_xact_lock(hashtextextended('bgtask kind ' || $1, 0))`
	kindRunningSQL = `SELECT count(*) FROM bgtask_tasks WHERE status = 'running' AND resume IS NOT NULL AND (resume::jsonb)->>'kind' = $1`
)

// errNoRoom aborts a claim when its kind runs its limit already.
var errNoRoom = errors.New("pgstore: kind at its limit")

// ClaimUnder implements store.KindLimiter: in one transaction, fenced as
// Commit is, it takes the kind's advisory lock, counts the running
// records of the kind across every instance and, if fewer than limit,
// writes claim through the reducer. Two round trips, on a connection of
// its own (not grouped with other commits).
func (s *Store) ClaimUnder(ctx context.Context, claim bgtype.TaskMeta, limit int) (bool, error) {
	if claim.Resume == nil || limit <= 0 {
		return false, fmt.Errorf("%w: ClaimUnder of a record without a kind, or a limit of %d", store.ErrInvalidAction, limit)
	}
	act := store.UpsertAction(claim)
	if err := store.ValidateCommit(claim.Owner, act); err != nil {
		return false, err
	}
	if s.isClosed() {
		return false, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return false, err
	}
	r := &commitReq{ctx: ctx, owner: claim.Owner, actions: []store.Action{act}}
	r.ids, r.replace = touched(r.actions)
	reqs := []*commitReq{r}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: claim: %w", err)
	}
	defer conn.Release()
	kind := claim.Resume.Kind
	locked, err := s.lockRowsAfter(ctx, conn, reqs, func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(kindLockSQL, kind)
		b.Queue(kindRunningSQL, kind)
		return func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("pgstore: claim: lock kind %s: %w", kind, err)
			}
			var n int
			if err := br.QueryRow().Scan(&n); err != nil {
				return fmt.Errorf("pgstore: claim: count kind %s: %w", kind, err)
			}
			if n >= limit {
				return errNoRoom
			}
			return nil
		}
	})
	if err != nil {
		abort(ctx, conn)
		if errors.Is(err, errNoRoom) {
			return false, nil
		}
		return false, err
	}
	w, retain, err := applyAll(locked, reqs)
	if err != nil || w.empty() {
		abort(ctx, conn) // the reducer dropped it: another claim came first
		return err == nil, err
	}
	if err := s.writeRows(ctx, conn, w, retain); err != nil {
		abort(ctx, conn)
		return false, fmt.Errorf("pgstore: claim: %w", err)
	}
	s.noteWritten(w)
	return true, nil
}

var _ store.KindLimiter = (*Store)(nil)
