package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/jackc/pgx/v5"
)

// TakeNotices implements store.SharedStore: it claims the undelivered
// notices addressed to owner, oldest first, and marks them delivered in the
// same statement. Besides the owner's own tasks, they may be about tasks of
// its sub-agents that ended or died (see Reap): Event.TaskID names the
// record, whose own owner is then the sub-agent's id (the notice row keeps
// it as task_owner). Concurrent callers never get the same notice (rows another
// caller holds are skipped). A notice that cannot be decoded makes the
// call fail with an error naming it, and no notice is marked delivered.
// On a started Store it is fenced like Commit: a lost instance claims
// nothing it could no longer deliver.
func (s *Store) TakeNotices(ctx context.Context, owner string) ([]bgtype.Event, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return nil, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: take notices: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var b pgx.Batch
	if fence := s.queueFence(&b); fence != nil {
		br := tx.SendBatch(ctx, &b)
		err := fence(br)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pgstore: take notices: %w", cerr)
		}
		if err != nil {
			return nil, err
		}
	}
	rs, err := tx.Query(ctx, `UPDATE bgtask_notices SET delivered_at = now() WHERE id IN (
			SELECT id FROM bgtask_notices WHERE owner = $1 AND delivered_at IS NULL
			ORDER BY id FOR UPDATE SKIP LOCKED)
		RETURNING id, event`, owner)
	if err != nil {
		return nil, fmt.Errorf("pgstore: take notices: %w", err)
	}
	type notice struct {
		id int64
		ev bgtype.Event
	}
	var out []notice
	for rs.Next() {
		var (
			n   notice
			raw []byte
		)
		if err := rs.Scan(&n.id, &raw); err != nil {
			rs.Close()
			return nil, fmt.Errorf("pgstore: take notices: %w", err)
		}
		if err := json.Unmarshal(raw, &n.ev); err != nil {
			rs.Close()
			return nil, fmt.Errorf("pgstore: notice %d of owner %q: %w", n.id, owner, err)
		}
		out = append(out, n)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: take notices: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: take notices: %w", err)
	}
	slices.SortFunc(out, func(a, b notice) int { return cmp.Compare(a.id, b.id) })
	evs := make([]bgtype.Event, len(out))
	for i, n := range out {
		evs[i] = n.ev
	}
	return evs, nil
}
