package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errRace means a row changed between the locking read and the write (only
// a concurrent insert of the same new id can do that): the commit is run
// again from the start.
var errRace = errors.New("pgstore: concurrent write")

// errDeadlock is the errRace of a transaction PostgreSQL ended to break a
// deadlock (40P01); the Store counts those (Deadlocks in the tests).
var errDeadlock = fmt.Errorf("%w: deadlock", errRace)

// maxRetries bounds how often Commit starts over after a race.
const maxRetries = 8

// Commit implements store.Store. It is one transaction: the rows the
// actions touch are locked (SELECT ... FOR UPDATE), store.Apply runs
// on them, and the rows that changed are written, each a compare-and-set
// on its version, then retention runs if a record turned terminal; two
// round trips in all. A commit that only adds new queued or running
// records reads nothing (its insert fails, and it takes the long way, if
// one of its ids exists). Nor does a commit whose records this Store
// wrote last (a completion, a progress report, with spawns beside
// them): the reducer runs on the records as the Store wrote them, and the
// rows are written only if their version is still the one it wrote (any
// change of a row, by another instance or by hand, bumps its version);
// otherwise nothing is written and the commit takes the long way. A row
// of another owner with the same id is left alone (that task is dropped
// from the actions).
//
// Commits that callers make at the same time are grouped: one transaction
// writes the actions of several callers, owners and tasks, applied in the
// order the callers arrived, and each caller gets its own result; the
// commits that arrive while a transaction's first statements run (a
// group's, or a lone commit's that reads nothing) join it before its
// COMMIT. When a group fails, each of its callers commits alone, so one
// caller's bad action fails that caller only. A caller whose ctx ends
// while it waits for a group returns ctx's error and nothing of it is
// written; once its group is under way it waits for that group's
// outcome. A caller that commits alone is stopped by its ctx until
// another commit joins its transaction, and then waits for the outcome.
//
// On a started Store every Commit is fenced. It returns an error matching
// ErrInstanceLost, and writes nothing, once the instance lost its
// registration, and also, before sending anything to the database, when
// its last successful heartbeat was sent more than nine tenths of the
// grace period ago (by this process's clock): by then a reaper may have
// declared it dead. In the database, the transaction locks the instance's
// registration and writes only while it is alive, so an instance a reaper
// declared dead never writes again, whatever its clock says.
func (s *Store) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateCommit(owner, actions...); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return err
	}
	r := &commitReq{ctx: ctx, owner: owner, actions: actions}
	r.ids, r.replace = touched(actions)
	return s.submit(r)
}

// commitRetry commits reqs in one transaction, starting over after a race.
func (s *Store) commitRetry(ctx context.Context, reqs []*commitReq) error {
	for try := 0; ; try++ {
		err := s.commitTx(ctx, reqs)
		s.countDeadlock(err)
		if !errors.Is(err, errRace) || try == maxRetries {
			return err
		}
	}
}

// commitTx commits reqs in one transaction: the one-round-trip insert when
// they only add new records, else the lock, apply, write way.
func (s *Store) commitTx(ctx context.Context, reqs []*commitReq) error {
	if w, one, ok := s.freshInserts(reqs); ok {
		err := s.insertFresh(ctx, w, one)
		if !errors.Is(err, errRace) {
			if err == nil {
				s.noteWritten(w)
			}
			return s.keyConflict(ctx, reqs, w, err)
		}
		// An id exists: take the long way, which reads it.
	}
	if w, retain, ok := s.cachedWrites(reqs, nil); ok {
		err := s.writeCached(ctx, w, retain)
		if !errors.Is(err, errStale) {
			if err == nil {
				s.cached.Add(1)
				s.noteWritten(w)
			}
			return err
		}
		s.forget(reqs) // a row changed meanwhile: read it
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	defer conn.Release()
	locked, err := s.lockRows(ctx, conn, reqs)
	if err != nil {
		abort(ctx, conn)
		return err
	}
	w, retain, err := applyAll(locked, reqs)
	if err != nil || w.empty() {
		abort(ctx, conn) // nothing changed: the rollback releases the locks
		return err
	}
	if err := s.writeRows(ctx, conn, w, retain); err != nil {
		abort(ctx, conn)
		conn.Release()
		return s.keyConflict(ctx, reqs, w, err)
	}
	s.noteWritten(w)
	return nil
}

// keyConflict turns err, when it is the refusal of an idempotency key, into
// the error that names the record holding the key; for a group, whose
// callers then commit alone, it stays as it is.
func (s *Store) keyConflict(ctx context.Context, reqs []*commitReq, w *writes, err error) error {
	if err == nil || len(reqs) != 1 || !isKeyConflict(err) {
		return err
	}
	return s.duplicateKey(ctx, reqs[0].owner, &w.ins, err)
}

// abort rolls back the transaction conn is in, if any. A connection the
// rollback fails on is not idle, and the pool drops it.
func abort(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() != 'I' {
		conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
}

// queueWrites adds the inserts, updates and deletes of w to b and
// returns how many rows each must write.
func queueWrites(b *pgx.Batch, w *writes) (want []int) {
	if n := len(w.ins.id); n > 0 {
		b.Queue(insertSQL, w.ins.args()...)
		want = append(want, n)
	}
	switch n := len(w.upd.id); n {
	case 0:
	case 1:
		b.Queue(updateOneSQL, updateOneArgs(&w.upd)...)
		want = append(want, n)
	default:
		b.Queue(updateSQL, w.upd.args()...)
		want = append(want, n)
	}
	if n := len(w.delID); n > 0 {
		b.Queue(deleteSQL, w.delID, w.delVersion)
		want = append(want, n)
	}
	return want
}

// readWrites reads the results of queueWrites: errRace when an insert met
// an id taken meanwhile or a row was not written.
func readWrites(br pgx.BatchResults, want []int) error {
	race := false
	for _, n := range want {
		tag, err := br.Exec()
		if err != nil {
			return commitErr(err)
		}
		race = race || tag.RowsAffected() != int64(n)
	}
	if race {
		return errRace
	}
	return nil
}

// commitErr wraps a database error of a commit; a unique violation of the
// primary key (a concurrent insert of the same new id) and a deadlock
// (two writers changing the terminal counts of the same owners in
// different statements) are errRace.
func commitErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23505" && pgErr.ConstraintName == "bgtask_tasks_pkey" || pgErr.Code == "40P01") {
		if pgErr.Code == "40P01" {
			return errDeadlock // with another writer over the owners' counts; start over
		}
		return errRace
	}
	return fmt.Errorf("pgstore: commit: %w", err)
}

// execWrites sends the inserts, updates and deletes in one round trip
// and checks that every row was written.
func execWrites(ctx context.Context, tx pgx.Tx, w *writes) error {
	var b pgx.Batch
	want := queueWrites(&b, w)
	br := tx.SendBatch(ctx, &b)
	err := readWrites(br, want)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = commitErr(cerr)
	}
	return err
}

// touched returns the ids the actions name, and whether one of them is a
// ReplaceAll (which touches every row of the owner).
func touched(actions []store.Action) (ids []string, replace bool) {
	for _, a := range actions {
		replace = replace || a.Op == store.OpReplaceAll
		for i := range a.Tasks {
			ids = append(ids, a.Tasks[i].ID)
		}
		ids = append(ids, a.IDs...)
	}
	return ids, replace
}

// withoutForeign returns a without the tasks whose id belongs to another
// owner: a record never moves between owners. a's slices are not changed.
func withoutForeign(a store.Action, foreign map[string]bool) store.Action {
	kept := make([]bgtype.TaskMeta, 0, len(a.Tasks))
	for _, t := range a.Tasks {
		if !foreign[t.ID] {
			kept = append(kept, t)
		}
	}
	if a.Op == store.OpUpsert && len(kept) == 0 {
		return store.Action{Op: store.OpRemove} // nothing left to do
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
	// retainCountSQL deletes, for each owner of $1 whose count of terminal
	// rows (bgtask_owner_terminal, kept by triggers) is above $2, its
	// oldest terminal rows beyond that many (index bgtask_tasks_retain);
	// an owner under the limit costs one primary-key lookup. The commit
	// holds the lock on each of these counts already (its writes made
	// them terminal), so the count and the rows it reads agree.
	retainCountSQL = `DELETE FROM bgtask_tasks WHERE id = ANY(ARRAY(
		SELECT r.id FROM bgtask_owner_terminal AS c, LATERAL (
			SELECT id FROM bgtask_tasks WHERE owner = c.owner AND terminal_at IS NOT NULL
			ORDER BY terminal_at, id LIMIT c.n - $2) AS r
		WHERE c.owner = ANY($1) AND c.n > $2))`
)

// keyIndex is the unique index on an owner's idempotency keys.
const keyIndex = "bgtask_tasks_idempotency"

// isKeyConflict reports whether err is the unique index on idempotency
// keys refusing an insert.
func isKeyConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == keyIndex
}

// duplicateKey reports which record holds a key that one of ins (the
// refused inserts) asked for, as a *bgtype.DuplicateKeyError. When that
// record is gone already (removed by retention meanwhile), it is a race:
// the commit starts over. Two inserts of one commit with the same key
// name the first.
func (s *Store) duplicateKey(ctx context.Context, owner string, ins *cols, cause error) error {
	var keys []string
	first := map[string]string{} // key -> first id of the commit that asks for it
	var twice *bgtype.DuplicateKeyError
	for i, k := range ins.idemKey {
		if k == "" {
			continue
		}
		if id, ok := first[k]; ok && twice == nil {
			twice = &bgtype.DuplicateKeyError{Key: k, TaskID: id}
			continue
		}
		first[k] = ins.id[i]
		keys = append(keys, k)
	}
	var id, key string
	err := s.pool.QueryRow(ctx, `SELECT id, idempotency_key FROM bgtask_tasks WHERE owner = $1 AND idempotency_key = ANY($2) ORDER BY id LIMIT 1`, owner, keys).Scan(&id, &key)
	switch {
	case err == nil:
		return &bgtype.DuplicateKeyError{Key: key, TaskID: id}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: commit: %w (and reading the record that has the key: %v)", cause, err)
	case twice != nil:
		return twice
	}
	return errRace
}
