package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// postNoticesSQL records the events of $2 (JSON texts, in order) as
// notices for $1, and notifies the settled channel ($4, the scope's) with "-", the poster's
// instance and the owner (see settledPayload), when the owner fits.
const postNoticesSQL = `WITH ins AS (
		INSERT INTO bgtask_notices (owner, event, task_id, task_owner, to_task)
		SELECT $1, e.ev::jsonb, coalesce(e.ev::jsonb->>'task_id', ''), $1, false
		FROM unnest($2::text[]) WITH ORDINALITY AS e(ev, n) ORDER BY e.n
		RETURNING 1)
	SELECT count(*), CASE WHEN octet_length($1) <= 4000 THEN
		pg_notify($4, '- ' || octet_length($3::text) || ':' || $3 || $1) END FROM ins`

// PostNotices implements store.NoticePoster: it records evs as notices
// for owner, in order, in one statement, and tells every instance's
// listener (an idle Receiver of owner there wakes). On a started Store it
// is fenced like Commit: a lost instance posts nothing.
func (s *Store) PostNotices(ctx context.Context, owner, instance string, evs []bgtype.Event) error {
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return err
	}
	raw := make([]string, len(evs))
	for i := range evs {
		b, err := json.Marshal(evs[i])
		if err != nil {
			return fmt.Errorf("pgstore: post notices: %w", err)
		}
		raw[i] = string(b)
	}
	var n int64
	var notified *string
	if err := s.pool.QueryRow(ctx, postNoticesSQL, owner, raw, instance, s.scope.settled).Scan(&n, &notified); err != nil {
		return fmt.Errorf("pgstore: post notices for %q: %w", owner, err)
	}
	return nil
}

var _ store.NoticePoster = (*Store)(nil)
