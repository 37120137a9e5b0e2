package sqlitestore

import (
	"context"
	"fmt"
	"iter"

	"github.com/bgtask/bgtask/store"
)

// undeliveredSQL finds the owners of terminal records that are neither
// announced nor silent. It reads the index of owners' records
// (tasks_owner_terminal), which is in owner order, so DISTINCT needs no
// sort, and skips live records by the index's terminal_seq without reading
// their rows.
const undeliveredSQL = `SELECT DISTINCT owner FROM tasks INDEXED BY tasks_owner_terminal
	WHERE terminal_seq IS NOT NULL AND announced = 0 AND wake <> 'silent'`

// UndeliveredOwners implements store.UndeliveredLister: it yields, each
// once, in owner order, the owners that hold a terminal record that is
// neither announced nor silent, with one query. The owners are read before
// the first is yielded, so no read stays open while the caller works.
// After Close it yields ErrClosed.
func (s *Store) UndeliveredOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if s.isClosed() {
			yield("", ErrClosed)
			return
		}
		owners, err := s.undeliveredOwners(ctx)
		for _, o := range owners {
			if !yield(o, nil) {
				return
			}
		}
		if err != nil {
			yield("", s.readErr(fmt.Errorf("sqlitestore: undelivered owners: %w", err)))
		}
	}
}

func (s *Store) undeliveredOwners(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, undeliveredSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return owners, err
		}
		owners = append(owners, o)
	}
	return owners, rows.Err()
}

var _ store.UndeliveredLister = (*Store)(nil)
