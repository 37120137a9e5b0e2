package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// ErrShared is returned by Recover when another process (or another Store
// of this process) has the database open: its records may be live, so
// none is touched.
var ErrShared = errors.New("sqlitestore: another process has the database open; nothing recovered")

// recoverBatch bounds the records one recovery step reads and commits.
const recoverBatch = 500

// InterruptOrphaned implements store.OrphanInterrupter. When this Store is the only one with
// the database open (it holds the lock file next to it exclusive for the
// call), every queued, running or awaiting_input record of every owner,
// but those of the runtime instances that committed through this Store,
// was left by a process that is gone: it becomes interrupted
// (store.Orphaned: a resumable task with attempts left goes back to the
// queue instead), in batches of a few hundred records, one Commit
// per owner of each batch. It returns how many it interrupted, or
// ErrShared (nothing touched) when another Store has the database open.
// Open runs it by itself when it finds the database alone. A corrupt
// record is skipped and named in the returned error. While another Store
// (of any process) tries for the lock or recovers, InterruptOrphaned waits for it,
// whatever ctx says. A InterruptOrphaned that finds the database shared never lets
// another Store find itself alone meanwhile.
func (s *Store) InterruptOrphaned(ctx context.Context) (int, error) {
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
		defer s.lock.release() // a failure leaves it exclusive: safe, if unfriendly
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
			byOwner = make(map[string][]store.Action)
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
			if s.liveInstance(m.Instance) || store.Waiting(&m) {
				continue // a waiting resumable task is no instance's: a Manager that runs its kind claims it
			}
			if byOwner[m.Owner] == nil {
				owners = append(owners, m.Owner)
			}
			byOwner[m.Owner] = append(byOwner[m.Owner], store.UpsertAction(store.Orphaned(m, s.cfg.now().UTC().Truncate(time.Microsecond))))
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
// Store: its records are never recovered by it, and the Store holds the
// instance's lock (instance locks) until Close, so that other processes
// know it runs. It is called before the record's transaction commits.
func (s *Store) noteInstance(instance string) error {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if _, ok := s.live[instance]; ok {
		return nil
	}
	if !s.memory {
		f, err := holdInstance(s.path, instance)
		if err != nil {
			return err
		}
		if f != nil {
			s.held = append(s.held, f)
		}
	}
	if s.live == nil {
		s.live = make(map[string]struct{})
	}
	s.live[instance] = struct{}{}
	return nil
}

func (s *Store) liveInstance(instance string) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	_, ok := s.live[instance]
	return ok
}

// dropInstances lets the instance locks go, at Close.
func (s *Store) dropInstances() {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	for _, f := range s.held {
		dropInstance(f)
	}
	s.held = nil
}

// InstanceAlive implements store.InstanceLiveness: it reports whether
// the runtime instance that wrote a record still runs, in this process or
// another that has the database open. An instance is alive while a Store
// through which it committed a live record is open (each such Store holds
// a lock file for it in the directory <db>.instances next to the
// database; the kernel lets it go when the process dies, however it
// dies). So an instance whose process was killed is known gone at once,
// and one whose Store was closed too. An empty instance is never alive.
//
// On a system without flock (not unix) it cannot tell: only this Store's
// own instances are alive, every other one is reported gone, and Restore
// interrupts its records as after a restart. Open the file from one
// process at a time there. Safe for concurrent use; ErrClosed after
// Close.
func (s *Store) InstanceAlive(ctx context.Context, instance string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	switch {
	case s.isClosed():
		return false, ErrClosed
	case instance == "":
		return false, nil
	case s.liveInstance(instance):
		return true, nil
	case s.memory:
		return false, nil
	}
	return instanceAlive(s.path, instance)
}

var _ store.InstanceLiveness = (*Store)(nil)

var _ store.OrphanInterrupter = (*Store)(nil)

// WaitingTasks implements store.KindQueue: the records of resumable tasks
// that wait in the queue for an instance to claim them, oldest first.
func (s *Store) WaitingTasks(ctx context.Context, limit int) ([]bgtype.TaskMeta, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+columns+` FROM tasks INDEXED BY tasks_waiting
		WHERE resume IS NOT NULL AND status = 'queued' AND instance = '' ORDER BY created_at, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: waiting tasks: %w", err)
	}
	defer rows.Close()
	var (
		out     []bgtype.TaskMeta
		corrupt []error
	)
	for rows.Next() {
		var r row
		if err := r.scan(rows); err != nil {
			return out, err
		}
		m, err := r.decode()
		if err != nil {
			corrupt = append(corrupt, err)
			continue
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("sqlitestore: waiting tasks: %w", err)
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("sqlitestore: waiting tasks skipped corrupt records: %w", errors.Join(corrupt...))
	}
	return out, nil
}

var _ store.KindQueue = (*Store)(nil)
