package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The age limit's deletes run apart from the commits, in a transaction of
// their own on a background connection: at most once every ageEvery a
// Store, after a commit that made records terminal, a pass deletes up to
// retainAgeBatch terminal records past the limit (the reaper's clean-up
// takes the rest about once a minute). Its deletes change the terminal
// counts (decision 170) of any owners. In a commit's transaction, after
// statements that locked higher owners' counts, they took lower ones out
// of the owners' lock order (lockorder.go) and deadlocked with
// transactions of other Stores that took them in order. The pass locks
// the counts of the owners whose records it deletes first, in owner
// order, holding nothing else, and then deletes, skipping records others
// hold: it waits only for counts, and only in order, so it closes no
// cycle with transactions that take theirs in order. The committer never
// waits for it: it runs on a goroutine of the Store, which Close cancels
// and waits for.

// ageEvery is how often a Store checks the age limit: a second's delay
// is nothing against an age limit.
const ageEvery = time.Second

// retainAgeBatch bounds the aged rows one pass deletes, so a pass after
// a long pause does not hold the counts for the whole backlog.
const retainAgeBatch = 100

const (
	// lockAgedSQL locks, in owner order, the terminal counts of the
	// owners of the oldest $2 terminal rows older than $1 microseconds
	// (index bgtask_tasks_aged) and returns those owners.
	lockAgedSQL = `SELECT owner FROM bgtask_owner_terminal WHERE owner = ANY(ARRAY(
		SELECT owner FROM bgtask_tasks WHERE terminal_at < now() - make_interval(secs => $1::bigint / 1e6)
		ORDER BY terminal_at LIMIT $2))
		ORDER BY owner FOR UPDATE`
	// retainAgeSQL deletes up to $2 terminal rows older than $1
	// microseconds of the owners in $3 (whose counts the transaction
	// holds), skipping rows another transaction holds. now() is the
	// transaction's start, as in lockAgedSQL.
	retainAgeSQL = `DELETE FROM bgtask_tasks WHERE id = ANY(ARRAY(
		SELECT id FROM bgtask_tasks WHERE terminal_at < now() - make_interval(secs => $1::bigint / 1e6)
			AND owner = ANY($3)
		ORDER BY terminal_at LIMIT $2 FOR UPDATE SKIP LOCKED))`
)

// checkAge starts an age pass unless the Store has no age limit, checked
// it less than ageEvery ago, runs a pass still, or is closed. Call it
// after a commit that made records terminal; it does not wait for the
// pass.
func (s *Store) checkAge() {
	if s.cfg.retainFor <= 0 || !s.ageDue() || !s.ageBusy.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.ageBusy.Store(false)
		return
	}
	s.ageWG.Go(s.agePass)
}

// ageDue reports whether the age limit is checked now: the first time,
// then at most once every ageEvery.
func (s *Store) ageDue() bool {
	now := time.Now().UnixNano()
	next := s.ageNext.Load()
	return now >= next && s.ageNext.CompareAndSwap(next, now+int64(ageEvery))
}

// agePass runs one age pass. Its failure is no committer's: it is logged
// at Debug, and the next pass tries again.
func (s *Store) agePass() {
	defer s.ageBusy.Store(false)
	n, err := s.deleteAged(s.ageCtx)
	if err != nil {
		s.countDeadlock(commitErr(err))
		if s.ageCtx.Err() == nil {
			s.log.Debug("pgstore: age limit pass failed", "err", err)
		}
		return
	}
	s.agePasses.Add(1)
	if n > 0 {
		s.log.Debug("pgstore: deleted records past the age limit", "records", n)
	}
}

// deleteAged deletes up to retainAgeBatch terminal records past the age
// limit in one transaction, and returns how many.
func (s *Store) deleteAged(ctx context.Context) (int64, error) {
	tx, err := s.bg.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	age := s.cfg.retainFor.Microseconds()
	rs, err := tx.Query(ctx, lockAgedSQL, age, retainAgeBatch)
	if err != nil {
		return 0, err
	}
	owners, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil || len(owners) == 0 {
		return 0, err
	}
	tag, err := tx.Exec(ctx, retainAgeSQL, age, retainAgeBatch, owners)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: age limit: %w", err)
	}
	return tag.RowsAffected(), nil
}
