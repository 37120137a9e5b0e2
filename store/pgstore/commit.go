package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errRace means a row changed between the locking read and the write (only
// a concurrent insert of the same new id can do that): the commit is run
// again from the start.
var errRace = errors.New("pgstore: concurrent write")

// maxRetries bounds how often Commit starts over after a race.
const maxRetries = 8

// Commit implements bgtask.Store. It is one transaction: the rows the
// actions touch are locked (SELECT ... FOR UPDATE), bgtask.ApplyAction runs
// on them, and the rows that changed are written in one statement, each a
// compare-and-set on its version, then retention runs if a record turned
// terminal. A row of another owner with the same id is left alone (that
// task is dropped from the actions).
//
// On a started Store every Commit is fenced. It returns an error matching
// ErrInstanceLost, and writes nothing, once the instance lost its
// registration, and also, before sending anything to the database, when
// its last successful heartbeat was sent more than nine tenths of the
// grace period ago (by this process's clock): by then a reaper may have
// declared it dead. In the database, the transaction locks the instance's
// registration and writes only while it is alive, so an instance a reaper
// declared dead never writes again, whatever its clock says.
func (s *Store) Commit(ctx context.Context, owner string, actions ...bgtask.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := bgtask.ValidateCommit(owner, actions...); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return err
	}
	for try := 0; ; try++ {
		err := s.commitOnce(ctx, owner, actions)
		if !errors.Is(err, errRace) || try == maxRetries {
			return err
		}
	}
}

func (s *Store) commitOnce(ctx context.Context, owner string, actions []bgtask.Action) error {
	ids, replace := touched(actions)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := s.lockRows(ctx, tx, owner, ids, replace)
	if err != nil {
		return err
	}
	snap := bgtask.Snapshot{Tasks: make(map[string]bgtask.TaskMeta, len(rows))}
	before := make(map[string]row, len(rows))
	var foreign map[string]bool
	for _, r := range rows {
		if r.meta.Owner != owner {
			if foreign == nil {
				foreign = make(map[string]bool)
			}
			foreign[r.meta.ID] = true
			continue
		}
		snap.Tasks[r.meta.ID] = r.meta
		before[r.meta.ID] = r
	}
	for _, a := range actions {
		if foreign != nil {
			a = withoutForeign(a, foreign)
		}
		bgtask.ApplyAction(&snap, a)
	}
	var w writes
	turnedTerminal := false
	for id, next := range snap.Tasks {
		old, ok := before[id]
		switch {
		case !ok:
			w.put(&next, 0)
			turnedTerminal = turnedTerminal || next.Status.IsTerminal()
		case !sameMeta(&old.meta, &next):
			w.put(&next, old.version)
			turnedTerminal = turnedTerminal || next.Status.IsTerminal() && !old.meta.Status.IsTerminal()
		}
	}
	for id, old := range before {
		if _, ok := snap.Tasks[id]; !ok {
			w.del(id, old.version)
		}
	}
	if w.empty() {
		return nil // nothing changed: the rollback releases the locks
	}
	if err := execWrites(ctx, tx, &w); err != nil {
		if isKeyConflict(err) {
			tx.Rollback(context.WithoutCancel(ctx))
			return s.duplicateKey(ctx, owner, &w.ins, err)
		}
		return err
	}
	if turnedTerminal {
		if err := s.retain(ctx, tx, owner); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}

// execWrites sends the inserts, updates and deletes in one round trip
// and checks that every row was written.
func execWrites(ctx context.Context, tx pgx.Tx, w *writes) error {
	var (
		b    pgx.Batch
		want []int
	)
	if n := len(w.ins.id); n > 0 {
		b.Queue(insertSQL, w.ins.args()...)
		want = append(want, n)
	}
	if n := len(w.upd.id); n > 0 {
		b.Queue(updateSQL, w.upd.args()...)
		want = append(want, n)
	}
	if n := len(w.delID); n > 0 {
		b.Queue(deleteSQL, w.delID, w.delVersion)
		want = append(want, n)
	}
	br := tx.SendBatch(ctx, &b)
	race := false
	for _, n := range want {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return fmt.Errorf("pgstore: commit: %w", err)
		}
		race = race || tag.RowsAffected() != int64(n)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	if race {
		return errRace
	}
	return nil
}

// touched returns the ids the actions name, and whether one of them is a
// ReplaceAll (which touches every row of the owner).
func touched(actions []bgtask.Action) (ids []string, replace bool) {
	for _, a := range actions {
		replace = replace || a.Op == bgtask.OpReplaceAll
		for i := range a.Tasks {
			ids = append(ids, a.Tasks[i].ID)
		}
		ids = append(ids, a.IDs...)
	}
	return ids, replace
}

// withoutForeign returns a without the tasks whose id belongs to another
// owner: a record never moves between owners. a's slices are not changed.
func withoutForeign(a bgtask.Action, foreign map[string]bool) bgtask.Action {
	kept := make([]bgtask.TaskMeta, 0, len(a.Tasks))
	for _, t := range a.Tasks {
		if !foreign[t.ID] {
			kept = append(kept, t)
		}
	}
	if a.Op == bgtask.OpUpsert && len(kept) == 0 {
		return bgtask.Action{Op: bgtask.OpRemove} // nothing left to do
	}
	a.Tasks = kept
	return a
}

// Every statement of a commit is served by an index whatever the
// planner's settings and statistics: rows are found by primary key
// (id = ANY of an array) or by an index whose leading column the statement
// fixes, and no statement ORs two conditions that different indexes serve.
// Its cost then stays far below the JIT thresholds on any table size.
const (
	// lockByIDSQL locks the rows the actions name.
	lockByIDSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks WHERE id = ANY($1) FOR UPDATE`
	// lockByOwnerSQL locks every row of the owner, for a ReplaceAll.
	lockByOwnerSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks WHERE owner = $1 FOR UPDATE`
	// retainCountSQL deletes the owner's terminal rows beyond the newest $2
	// (index bgtask_tasks_retain, read backwards).
	retainCountSQL = `DELETE FROM bgtask_tasks WHERE id = ANY(ARRAY(
		SELECT id FROM bgtask_tasks WHERE owner = $1 AND terminal_at IS NOT NULL
		ORDER BY terminal_at DESC, id DESC OFFSET $2))`
	// retainAgeSQL deletes up to $2 terminal rows older than $1
	// microseconds (index bgtask_tasks_aged), skipping rows another commit
	// is deleting; the reaper's clean-up takes the rest.
	retainAgeSQL = `DELETE FROM bgtask_tasks WHERE id = ANY(ARRAY(
		SELECT id FROM bgtask_tasks WHERE terminal_at < now() - make_interval(secs => $1::bigint / 1e6)
		ORDER BY terminal_at LIMIT $2 FOR UPDATE SKIP LOCKED))`
)

// retainAgeBatch bounds the aged rows one commit deletes, so a commit after
// a long pause does not pay for the whole backlog.
const retainAgeBatch = 100

// lockRows checks the fence of a started Store (see Commit) and reads and
// locks the rows a commit touches: those the actions name, and with
// replace every row of the owner, in one round trip. Two statements rather
// than one with "OR owner = $2", which no single index serves.
func (s *Store) lockRows(ctx context.Context, tx pgx.Tx, owner string, ids []string, replace bool) ([]row, error) {
	var b pgx.Batch
	fence := s.queueFence(&b)
	first := b.Len()
	b.Queue(lockByIDSQL, ids)
	if replace {
		b.Queue(lockByOwnerSQL, owner)
	}
	br := tx.SendBatch(ctx, &b)
	defer br.Close()
	if fence != nil {
		if err := fence(br); err != nil {
			return nil, err
		}
	}
	var rows []row
	var seen map[string]bool // only a ReplaceAll reads a row twice
	for i := range b.Len() - first {
		rs, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("pgstore: commit: %w", err)
		}
		got, err := collect(rs)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			rows = got
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(rows))
			for _, r := range rows {
				seen[r.meta.ID] = true
			}
		}
		for _, r := range got {
			if !seen[r.meta.ID] {
				rows = append(rows, r)
			}
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgstore: commit: %w", err)
	}
	return rows, nil
}

// retain deletes the owner's terminal rows beyond the count limit, and
// terminal rows older than the age limit.
func (s *Store) retain(ctx context.Context, tx pgx.Tx, owner string) error {
	var b pgx.Batch
	b.Queue(retainCountSQL, owner, s.cfg.retainPerOwner)
	if s.cfg.retainFor > 0 {
		b.Queue(retainAgeSQL, s.cfg.retainFor.Microseconds(), retainAgeBatch)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("pgstore: retention: %w", err)
	}
	return nil
}

// keyIndex is the unique index on an owner's idempotency keys.
const keyIndex = "bgtask_tasks_idempotency"

// isKeyConflict reports whether err is the unique index on idempotency
// keys refusing an insert.
func isKeyConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == keyIndex
}

// duplicateKey reports which record holds a key that one of ins (the
// refused inserts) asked for, as a *bgtask.DuplicateKeyError. When that
// record is gone already (removed by retention meanwhile), it is a race:
// the commit starts over. Two inserts of one commit with the same key
// name the first.
func (s *Store) duplicateKey(ctx context.Context, owner string, ins *cols, cause error) error {
	var keys []string
	first := map[string]string{} // key -> first id of the commit that asks for it
	var twice *bgtask.DuplicateKeyError
	for i, k := range ins.idemKey {
		if k == "" {
			continue
		}
		if id, ok := first[k]; ok && twice == nil {
			twice = &bgtask.DuplicateKeyError{Key: k, TaskID: id}
			continue
		}
		first[k] = ins.id[i]
		keys = append(keys, k)
	}
	var id, key string
	err := s.pool.QueryRow(ctx, `SELECT id, idempotency_key FROM bgtask_tasks WHERE owner = $1 AND idempotency_key = ANY($2) ORDER BY id LIMIT 1`, owner, keys).Scan(&id, &key)
	switch {
	case err == nil:
		return &bgtask.DuplicateKeyError{Key: key, TaskID: id}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: commit: %w (and reading the record that has the key: %v)", cause, err)
	case twice != nil:
		return twice
	}
	return errRace
}
