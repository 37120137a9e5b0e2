package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The age limit's deletes of tasks run apart from the commits, in
// transactions of their own on a background connection: at most once
// every ageEvery a Store, after a commit that made records terminal, a
// pass deletes up to retainAgeBatch terminal records past the limit; the
// reaper's clean-up takes the rest about once a minute, in batches, the
// same way (deleteAged). Their deletes change the terminal counts
// (decision 170) of any owners. Run in a commit's transaction after
// statements that locked higher owners' counts, they took lower ones out
// of the owners' lock order (lockorder.go) and deadlocked with other
// Stores' transactions that took them in order; run as one statement (as
// the clean-up was), they held the records they deleted while they waited
// for the counts, and deadlocked with a retention (retainCountSQL) that
// held a count and waited for those records. So deleteAged locks the
// counts of the owners whose records it deletes first, in owner order,
// holding nothing else, and then deletes, skipping the records others
// hold: it waits only for counts, only in order, and holds nothing another
// waits for until it has them all, so it closes no cycle with
// transactions that take theirs in order. No committer waits for a pass:
// it runs on a goroutine of the Store, which Close cancels and waits for.

// ageEvery is how often a Store checks the age limit: a second's delay
// is nothing against an age limit.
const ageEvery = time.Second

// retainAgeBatch bounds the aged rows one pass deletes, so a pass after
// a long pause does not hold the counts for the whole backlog.
const retainAgeBatch = 100

const (
	// lockAgedSQL locks, in owner order (bytes, lockorder.go), the
	// terminal counts of the owners of the oldest $2 terminal rows older
	// than $1 microseconds (index bgtask_tasks_aged) and returns those
	// owners.
	lockAgedSQL = `SELECT owner FROM bgtask_owner_terminal WHERE owner = ANY(ARRAY(
		SELECT owner FROM bgtask_tasks WHERE terminal_at < now() - make_interval(secs => $1::bigint / 1e6)
		ORDER BY terminal_at LIMIT $2))
		ORDER BY owner COLLATE "C" FOR UPDATE`
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
	n, err := s.deleteAged(s.ageCtx, retainAgeBatch)
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

// deleteAged deletes up to limit terminal records past the age limit in
// one transaction, and returns how many: it locks the counts of the
// owners of the oldest limit of them, in owner order, then deletes their
// records past the limit that no one else holds.
func (s *Store) deleteAged(ctx context.Context, limit int) (int64, error) {
	tx, err := s.bg.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	age := s.cfg.retainFor.Microseconds()
	rs, err := tx.Query(ctx, lockAgedSQL, age, limit)
	if err != nil {
		return 0, err
	}
	owners, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil || len(owners) == 0 {
		return 0, err
	}
	tag, err := tx.Exec(ctx, retainAgeSQL, age, limit, owners)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: age limit: %w", err)
	}
	return tag.RowsAffected(), nil
}
