package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask"
)

// ErrShared is returned by Recover when another process (or another Store
// of this process) has the database open: its records may be live, so
// none is touched.
var ErrShared = errors.New("sqlitestore: another process has the database open; nothing recovered")

// recoverBatch bounds the records one recovery step reads and commits.
const recoverBatch = 500

// Recover implements bgtask.Recoverer. When this Store is the only one with
// the database open (it holds the lock file next to it exclusive for the
// call), every queued, running or awaiting_input record of every owner,
// but those of the runtime instances that committed through this Store,
// was left by a process that is gone: it becomes interrupted
// (bgtask.Interrupted), in batches of a few hundred records, one Commit
// per owner of each batch. It returns how many it interrupted, or
// ErrShared (nothing touched) when another Store has the database open.
// Open runs it by itself when it finds the database alone. A corrupt
// record is skipped and named in the returned error.
func (s *Store) Recover(ctx context.Context) (int, error) {
	if s.isClosed() {
		return 0, ErrClosed
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.lock != nil {
		alone, err := s.lock.exclusive()
		if err != nil {
			return 0, err
		}
		if !alone {
			return 0, ErrShared
		}
		defer s.lock.shared() // a failure leaves it exclusive: safe, if unfriendly
	}
	return s.recoverStale(ctx, func(ctx context.Context, reqs []*request) error {
		for _, r := range reqs {
			if err := s.Commit(ctx, r.owner, r.actions...); err != nil {
				return fmt.Errorf("sqlitestore: recover owner %q: %w", r.owner, err)
			}
		}
		return nil
	})
}

// writeNow writes reqs in one transaction, without the writer: for Open,
// before the writer starts.
func (s *Store) writeNow(ctx context.Context, reqs []*request) error {
	for i, err := range s.writeBatch(ctx, reqs) {
		if err != nil {
			return fmt.Errorf("sqlitestore: recover owner %q: %w", reqs[i].owner, err)
		}
	}
	return nil
}

// recoverStale interrupts the live records of instances that are not this
// Store's, in batches, walking the table by id.
func (s *Store) recoverStale(ctx context.Context, write func(context.Context, []*request) error) (int, error) {
	var (
		total   int
		corrupt []error
		after   string
	)
	for {
		rows, err := s.db.QueryContext(ctx, "SELECT "+columns+` FROM tasks
			WHERE status IN ('queued', 'running', 'awaiting_input') AND id > ? ORDER BY id LIMIT ?`, after, recoverBatch)
		if err != nil {
			return total, fmt.Errorf("sqlitestore: recover: %w", err)
		}
		var (
			byOwner = make(map[string][]bgtask.Action)
			owners  []string
			n       int
		)
		for rows.Next() {
			n++
			var r row
			if err := r.scan(rows); err != nil {
				rows.Close()
				return total, err
			}
			after = r.id
			m, err := r.decode()
			if err != nil {
				corrupt = append(corrupt, err)
				continue
			}
			if s.liveInstance(m.Instance) {
				continue
			}
			if byOwner[m.Owner] == nil {
				owners = append(owners, m.Owner)
			}
			byOwner[m.Owner] = append(byOwner[m.Owner], bgtask.Upsert(bgtask.Interrupted(m, s.cfg.now().UTC().Truncate(time.Microsecond))))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return total, fmt.Errorf("sqlitestore: recover: %w", err)
		}
		reqs := make([]*request, 0, len(owners))
		for _, owner := range owners {
			reqs = append(reqs, &request{owner: owner, actions: byOwner[owner]})
		}
		if len(reqs) > 0 {
			if err := write(ctx, reqs); err != nil {
				return total, err
			}
		}
		for _, owner := range owners {
			total += len(byOwner[owner])
		}
		if n < recoverBatch {
			break
		}
	}
	if len(corrupt) > 0 {
		return total, fmt.Errorf("sqlitestore: recover skipped corrupt records: %w", errors.Join(corrupt...))
	}
	return total, nil
}

// noteInstance records that instance committed a live record through this
// Store: its records are never recovered by it.
func (s *Store) noteInstance(instance string) {
	s.liveMu.Lock()
	if s.live == nil {
		s.live = make(map[string]struct{})
	}
	s.live[instance] = struct{}{}
	s.liveMu.Unlock()
}

func (s *Store) liveInstance(instance string) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	_, ok := s.live[instance]
	return ok
}

var _ bgtask.Recoverer = (*Store)(nil)
