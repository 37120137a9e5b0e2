package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bgtask/bgtask/store"
)

// PendingOwners implements store.PendingOwnerFinder: it returns those of
// owners that hold at least one record that is not terminal or not
// announced, each once, in no particular order, with one query. After Close
// it returns ErrClosed.
func (s *Store) PendingOwners(ctx context.Context, owners []string) ([]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if len(owners) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(owners)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: find pending owners: %w", err)
	}
	rows, err := s.st.pendingOwners.QueryContext(ctx, list)
	if err != nil {
		return nil, s.readErr(fmt.Errorf("sqlitestore: find pending owners: %w", err))
	}
	defer rows.Close()
	var live []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, s.readErr(fmt.Errorf("sqlitestore: find pending owners: %w", err))
		}
		live = append(live, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(fmt.Errorf("sqlitestore: find pending owners: %w", err))
	}
	return live, nil
}

var _ store.PendingOwnerFinder = (*Store)(nil)
