package pgstore

import (
	"context"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
)

// undeliveredSQL finds the owners of terminal rows that are neither
// announced nor silent (partial index bgtask_tasks_unannounced) and of
// notices not yet taken (partial index bgtask_notices_pending): both
// indexes hold only what is undelivered, so the query reads no delivered
// row.
const undeliveredSQL = `SELECT owner FROM bgtask_tasks WHERE NOT announced AND terminal_at IS NOT NULL AND wake <> 'silent'
	UNION
	SELECT owner FROM bgtask_notices WHERE delivered_at IS NULL`

// UndeliveredOwners implements store.UndeliveredLister: it yields, each
// once, in no particular order, the owners that hold a terminal record
// that is neither announced nor silent, or a notice not yet taken
// (TakeNotices), with one query. The owners are read before the first is
// yielded, so the loop body may call the Store. After Close it yields
// ErrClosed.
func (s *Store) UndeliveredOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if s.isClosed() {
			yield("", ErrClosed)
			return
		}
		owners, err := s.undeliveredOwners(ctx)
		if err != nil {
			yield("", fmt.Errorf("pgstore: undelivered owners: %w", err))
			return
		}
		for _, o := range owners {
			if !yield(o, nil) {
				return
			}
		}
	}
}

func (s *Store) undeliveredOwners(ctx context.Context) ([]string, error) {
	rs, err := s.pool.Query(ctx, undeliveredSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rs, pgx.RowTo[string])
}

var _ store.UndeliveredLister = (*Store)(nil)

// instanceOwnersSQL finds the owners of an instance's live records
// (partial index bgtask_tasks_live).
const instanceOwnersSQL = `SELECT DISTINCT owner FROM bgtask_tasks
	WHERE instance = $1 AND status IN ('queued', 'running', 'awaiting_input')`

// InstanceOwners implements store.InstanceOwnerLister: it yields, each
// once, the owners that hold a queued, running or awaiting-input record of
// instance, with one query; a restarted instance's Manager wakes them
// (bgtask.WithOnPendingOwner), since no reaper ends what its previous run
// left. The owners are read before the first is yielded. After Close it
// yields ErrClosed.
func (s *Store) InstanceOwners(ctx context.Context, instance string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if s.isClosed() {
			yield("", ErrClosed)
			return
		}
		rs, err := s.pool.Query(ctx, instanceOwnersSQL, instance)
		if err != nil {
			yield("", fmt.Errorf("pgstore: instance owners: %w", err))
			return
		}
		owners, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			yield("", fmt.Errorf("pgstore: instance owners: %w", err))
			return
		}
		for _, o := range owners {
			if !yield(o, nil) {
				return
			}
		}
	}
}

var _ store.InstanceOwnerLister = (*Store)(nil)
