package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// writeTx is one batch's transaction.
type writeTx struct {
	s   *Store
	ctx context.Context
	tx  *sql.Tx
	now int64 // the store's clock for this batch, in microseconds

	get, getMany, ownerOf, byOwner, upsert, insertNew, del, countTerminal, dropOldest *sql.Stmt // bound to tx when first used
	updateState, updateDetail                                                         *sql.Stmt

	counted counted // the current request's owner's terminal count, kept if it succeeds
	wrote   bool    // the current request has run a write statement

	dirty map[string]bool // ids this transaction wrote: not taken from the cache
	ops   []cacheOp       // the cache's changes, applied at commit
}

// maxCounted bounds how many owners' terminal counts the writer keeps.
const maxCounted = 4096

// counted is an owner's number of terminal records.
type counted struct {
	owner string
	n     int
}

func (w *writeTx) stmt(p **sql.Stmt, shared *sql.Stmt) *sql.Stmt {
	if *p == nil {
		*p = w.tx.StmtContext(w.ctx, shared)
	}
	return *p
}

// write applies every request of the batch in one transaction and returns
// each one's error. A request that fails before it wrote anything (a
// corrupt row, a failed read) fails alone. One that fails after it wrote
// needs a savepoint of its own to be undone alone: without savepoints the
// whole transaction is rolled back and write reports retry, and the caller
// writes the batch again with a savepoint per request. If the transaction
// itself fails, every request gets that error and nothing is written.
func (s *Store) write(ctx context.Context, batch []*request, savepoints bool) (errs []error, retry bool) {
	errs = make([]error, len(batch))
	seq := s.nextSeq
	var tx *sql.Tx
	undo := func() {
		if tx != nil {
			tx.Rollback()
		}
		s.nextSeq = seq
		clear(s.terminals) // counts merged by earlier requests were rolled back too
		s.oldestSet = false
	}
	abort := func(err error) ([]error, bool) {
		undo()
		for i := range errs {
			errs[i] = err
		}
		return errs, false
	}
	tx, err := s.beginWrite(ctx)
	if err != nil {
		s.releaseConn() // a connection that cannot begin: take another next time
		return abort(fmt.Errorf("sqlitestore: begin: %w", err))
	}
	if err := s.cache.validate(ctx, tx, s.st.dataVersion); err != nil {
		return abort(err)
	}
	w := &writeTx{s: s, ctx: ctx, tx: tx, now: s.cfg.now().UnixMicro()}
	single := len(batch) == 1
	savepoints = savepoints && !single
	var savepoint, rollbackTo, release *sql.Stmt
	if savepoints {
		savepoint, rollbackTo, release = tx.StmtContext(ctx, s.st.savepoint), tx.StmtContext(ctx, s.st.rollbackTo), tx.StmtContext(ctx, s.st.release)
	}
	ended := false // some record became terminal: check the age limit
	for i, r := range batch {
		if savepoints {
			if _, err := savepoint.ExecContext(ctx); err != nil {
				return abort(fmt.Errorf("sqlitestore: savepoint: %w", err))
			}
		}
		w.counted, w.wrote = counted{}, false
		mark := len(w.ops)
		e, err := w.apply(r)
		if err != nil {
			w.ops = w.ops[:mark] // its changes are not kept
		}
		switch {
		case err != nil && single:
			return abort(err)
		case err != nil && w.wrote && !savepoints:
			undo()
			return nil, true
		case err != nil && w.wrote:
			if _, rerr := rollbackTo.ExecContext(ctx); rerr != nil {
				return abort(fmt.Errorf("sqlitestore: rollback to savepoint: %w", errors.Join(rerr, err)))
			}
			errs[i] = err
		case err != nil:
			errs[i] = err // it wrote nothing
		default:
			ended = ended || e
			if c := w.counted; c.owner != "" {
				if _, ok := s.terminals[c.owner]; !ok && len(s.terminals) >= maxCounted {
					clear(s.terminals) // bounded: counting again costs one query per owner
				}
				s.terminals[c.owner] = c.n
			}
		}
		if savepoints {
			if _, err := release.ExecContext(ctx); err != nil {
				return abort(fmt.Errorf("sqlitestore: release savepoint: %w", err))
			}
		}
	}
	if ended && s.cfg.retainFor > 0 {
		if err := w.retainAge(); err != nil {
			return abort(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tx = nil
		return abort(fmt.Errorf("sqlitestore: commit: %w", err))
	}
	s.cache.commit(w.ops)
	return errs, false
}

// retainAge applies the age limit after a batch that ended tasks. The
// writer keeps the oldest terminal_at once it has read it, so that a batch
// with nothing old enough to delete costs no statement.
func (w *writeTx) retainAge() error {
	s := w.s
	cutoff := w.now - s.cfg.retainFor.Microseconds()
	if s.oldestSet && s.oldestEnd >= cutoff {
		s.oldestEnd = min(s.oldestEnd, w.now) // this batch's records
		return nil
	}
	res, err := w.tx.StmtContext(w.ctx, s.st.retainAge).ExecContext(w.ctx, cutoff)
	if err != nil {
		return fmt.Errorf("sqlitestore: age retention: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		clear(s.terminals) // owners unknown: count again when needed
	}
	var oldest sql.NullInt64
	if err := w.tx.StmtContext(w.ctx, s.st.oldestEnd).QueryRowContext(w.ctx).Scan(&oldest); err != nil {
		return fmt.Errorf("sqlitestore: age retention: %w", err)
	}
	s.oldestEnd, s.oldestSet = math.MaxInt64, true
	if oldest.Valid {
		s.oldestEnd = oldest.Int64
	}
	return nil
}

// apply runs one Commit call's actions: it takes the rows they touch (all
// the owner's rows for ReplaceAll) from the writer's cache or a read,
// reduces a Snapshot of them with store.Apply, and writes back only
// the rows that changed. A call naming one record the cache does not hold
// is first tried as a new record: the reducer runs on no row, and the row
// is inserted only if there is none; otherwise the row is read and the
// call reduced again. It reports whether a record became terminal.
func (w *writeTx) apply(r *request) (ended bool, err error) {
	owner := r.owner
	var (
		cur     map[string]bgtype.TaskMeta // the owner's rows as read
		foreign map[string]bool            // ids that belong to another owner: never moved
		order   []string                   // ids in the order the actions name them
		seen    = make(map[string]bool)
	)
	full, upserts := false, true
	for _, a := range r.actions {
		full = full || a.Op == store.OpReplaceAll
		upserts = upserts && a.Op == store.OpUpsert
		for i := range a.Tasks {
			if id := a.Tasks[i].ID; !seen[id] {
				seen[id] = true
				order = append(order, id)
			}
		}
		if a.Op == store.OpAnnounce { // its ids are written like an upsert's
			for _, id := range a.IDs {
				if !seen[id] {
					seen[id] = true
					order = append(order, id)
				}
			}
		}
	}
	if full {
		if cur, err = w.loadOwner(owner); err != nil {
			return false, err
		}
		for _, id := range order {
			if _, ok := cur[id]; ok {
				continue
			}
			var other string
			switch err := w.stmt(&w.ownerOf, w.s.st.ownerOf).QueryRowContext(w.ctx, id).Scan(&other); {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return false, fmt.Errorf("sqlitestore: read task %s: %w", id, err)
			default:
				foreign = addTo(foreign, id)
			}
		}
		return w.put(r, cur, foreign, order, nil, false)
	}
	ids := slices.Clone(order)
	for _, a := range r.actions {
		ids = append(ids, a.IDs...) // Remove's ids: read so the reducer sees them
	}
	if upserts && len(ids) == 1 {
		if _, ok := w.cached(ids[0]); !ok {
			ended, err = w.put(r, nil, nil, order, nil, true)
			if !errors.Is(err, errNotNew) {
				return ended, err
			}
		}
	}
	cur, foreign, known, err := w.readCached(ids, owner)
	if err != nil {
		return false, err
	}
	return w.put(r, cur, foreign, order, known, false)
}

// errNotNew is put's answer when a record tried as new has a row (or the
// reducer kept nothing of it): nothing was written, read it and try again.
var errNotNew = errors.New("sqlitestore: record is not new")

// put reduces the actions over cur and writes the rows that changed. known
// are the ids of cur whose rows have no terminal_seq (taken from the
// cache): the cache keeps them while they stay live. With assumeNew, cur is
// empty and order is one id assumed to have no row: the row is inserted
// only if there is none, and errNotNew reports that there was.
func (w *writeTx) put(r *request, cur map[string]bgtype.TaskMeta, foreign map[string]bool, order []string, known map[string]bool, assumeNew bool) (ended bool, err error) {
	owner := r.owner
	snap := store.Snapshot{Tasks: maps.Clone(cur)}
	for _, a := range r.actions {
		store.Apply(&snap, withoutForeign(a, foreign))
	}

	delta := 0 // change in the owner's number of terminal records
	for id, old := range cur {
		if _, ok := snap.Tasks[id]; !ok {
			w.wrote = true
			w.touch(id, nil)
			if _, err := w.stmt(&w.del, w.s.st.del).ExecContext(w.ctx, id); err != nil {
				return false, fmt.Errorf("sqlitestore: delete task %s: %w", id, err)
			}
			if old.Status.IsTerminal() {
				delta--
			}
		}
	}
	for _, id := range order {
		m, ok := snap.Tasks[id]
		if !ok {
			if assumeNew {
				return false, errNotNew // the reducer may keep something of it over a row
			}
			continue
		}
		old, had := cur[id]
		if had && sameMeta(&old, &m) {
			continue // dropped by the reducer, or a same-state re-mirror
		}
		var seq, at any // NULL: keep the row's own
		fresh := m.Status.IsTerminal() && !(had && old.Status.IsTerminal())
		if fresh {
			seq, at = w.s.nextSeq+1, w.now
		}
		vals := rowArgs(&m)
		kind := fullUpsert
		if had {
			kind = kindOf(rowArgs(&old), vals, fresh)
		}
		args := append(vals, seq, at)
		if assumeNew {
			res, err := w.stmt(&w.insertNew, w.s.st.insertNew).ExecContext(w.ctx, args...)
			if err != nil {
				return false, errNotNew // the read path runs it again and reports its error
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return false, errNotNew
			}
		} else {
			w.wrote = true
			var err error
			switch kind {
			case stateUpdate:
				_, err = w.stmt(&w.updateState, w.s.st.updateState).ExecContext(w.ctx, updateArgs(kind, vals, seq, at)...)
			case detailUpdate:
				_, err = w.stmt(&w.updateDetail, w.s.st.updateDetail).ExecContext(w.ctx, updateArgs(kind, vals, seq, at)...)
			default:
				_, err = w.stmt(&w.upsert, w.s.st.upsert).ExecContext(w.ctx, args...)
			}
			if err != nil {
				if m.IdempotencyKey != "" && !had && isKeyConflict(err) {
					return false, w.duplicateKey(owner, m.IdempotencyKey, err)
				}
				return false, fmt.Errorf("sqlitestore: write task %s: %w", id, err)
			}
		}
		w.wrote = true
		if fresh {
			w.s.nextSeq++
			ended = true
			delta++
		}
		if !m.Status.IsTerminal() && m.Instance != "" {
			// Recovery leaves this instance's records alone, and other
			// processes know it runs before the record is committed.
			if err := w.s.noteInstance(m.Instance); err != nil {
				return false, err
			}
		}
		// A row with no terminal_seq that stays live may be kept.
		keep := !m.Status.IsTerminal() && (!had || known[id])
		if keep {
			w.touch(id, &m)
		} else {
			w.touch(id, nil)
		}
	}
	if err := w.retain(owner, delta, ended); err != nil {
		return false, err
	}
	return ended, nil
}

// cached is the cache's record of id, unless this transaction has written
// id already (the cache is as of its start).
func (w *writeTx) cached(id string) (bgtype.TaskMeta, bool) {
	if w.dirty[id] {
		return bgtype.TaskMeta{}, false
	}
	m, ok := w.s.cache.rows[id]
	return m, ok
}

// touch notes that this transaction writes id: the cache keeps m (nil:
// forgets id) if the request and the transaction succeed.
func (w *writeTx) touch(id string, m *bgtype.TaskMeta) {
	if w.dirty == nil {
		w.dirty = make(map[string]bool)
	}
	w.dirty[id] = true
	if m == nil {
		w.ops = append(w.ops, cacheOp{id: id, forget: true})
		return
	}
	sm, err := stored(m)
	if err != nil {
		w.ops = append(w.ops, cacheOp{id: id, forget: true})
		return
	}
	w.ops = append(w.ops, cacheOp{id: id, m: sm})
}

// readCached is readAll, taking the rows the cache holds from it; known
// are the ids it took.
func (w *writeTx) readCached(ids []string, owner string) (cur map[string]bgtype.TaskMeta, foreign, known map[string]bool, err error) {
	var miss []string
	for _, id := range ids {
		m, ok := w.cached(id)
		switch {
		case !ok:
			miss = append(miss, id)
		case m.Owner != owner:
			foreign = addTo(foreign, id)
		default:
			known = addTo(known, id)
		}
	}
	if len(miss) == len(ids) {
		cur, foreign, err = w.readAll(ids, owner)
		return cur, foreign, nil, err
	}
	cur = make(map[string]bgtype.TaskMeta, len(ids))
	if len(miss) > 0 {
		read, other, err := w.readAll(miss, owner)
		if err != nil {
			return nil, nil, nil, err
		}
		maps.Copy(cur, read)
		for id := range other {
			foreign = addTo(foreign, id)
		}
	}
	for id := range known {
		cur[id] = w.s.cache.rows[id]
	}
	return cur, foreign, known, nil
}

// retain applies the count limit to owner after a commit that changed its
// number of terminal records by delta. The writer keeps each owner's count
// once it has counted it, so that a commit under the limit costs no query
// and one over it deletes the oldest records by index, not by a scan. The
// limit is exact, as in every store: an owner at it pays one delete per
// completion (docs/decisions.md says why that stays).
func (w *writeTx) retain(owner string, delta int, ended bool) error {
	counts := w.s.terminals
	n, known := counts[owner]
	switch {
	case known:
		n += delta
	case !ended:
		return nil // nothing new to keep: count it when it matters
	default:
		if err := w.stmt(&w.countTerminal, w.s.st.countTerminal).QueryRowContext(w.ctx, owner).Scan(&n); err != nil {
			return fmt.Errorf("sqlitestore: count terminal records of owner %q: %w", owner, err)
		}
	}
	if over := n - w.s.cfg.retainPerOwner; over > 0 {
		w.wrote = true
		if _, err := w.stmt(&w.dropOldest, w.s.st.dropOldest).ExecContext(w.ctx, owner, over); err != nil {
			return fmt.Errorf("sqlitestore: count retention for owner %q: %w", owner, err)
		}
		n -= over
	}
	w.counted = counted{owner, n}
	return nil
}

// read reads task id and reports whether it belongs to owner. A row of
// another owner is not decoded, so its corruption cannot fail this owner's
// commit. sql.ErrNoRows when there is none.
func (w *writeTx) read(id, owner string) (bgtype.TaskMeta, bool, error) {
	w.s.reads.Add(1)
	var rw row
	if err := rw.scan(w.stmt(&w.get, w.s.st.get).QueryRowContext(w.ctx, id)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return bgtype.TaskMeta{}, false, sql.ErrNoRows
		}
		return bgtype.TaskMeta{}, false, err
	}
	if rw.owner != owner {
		return bgtype.TaskMeta{}, false, nil
	}
	m, err := rw.decode()
	return m, true, err
}

// readAll reads the rows of ids: owner's, decoded by id, and the ids that
// belong to another owner. One id is read with a point query, several
// with one query.
func (w *writeTx) readAll(ids []string, owner string) (cur map[string]bgtype.TaskMeta, foreign map[string]bool, err error) {
	cur = make(map[string]bgtype.TaskMeta, len(ids))
	if len(ids) == 1 {
		m, mine, err := w.read(ids[0], owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, nil, err
		case mine:
			cur[m.ID] = m
		default:
			foreign = addTo(foreign, ids[0])
		}
		return cur, foreign, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: read tasks: %w", err)
	}
	w.s.reads.Add(1)
	rows, err := w.stmt(&w.getMany, w.s.st.getMany).QueryContext(w.ctx, list)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: read tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rw row
		if err := rw.scan(rows); err != nil {
			return nil, nil, err
		}
		if rw.owner != owner {
			foreign = addTo(foreign, rw.id) // not decoded: its corruption is not this owner's
			continue
		}
		m, err := rw.decode()
		if err != nil {
			return nil, nil, err
		}
		cur[m.ID] = m
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: read tasks: %w", err)
	}
	return cur, foreign, nil
}

func (w *writeTx) loadOwner(owner string) (map[string]bgtype.TaskMeta, error) {
	w.s.reads.Add(1)
	rows, err := w.stmt(&w.byOwner, w.s.st.byOwner).QueryContext(w.ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read owner %q: %w", owner, err)
	}
	ms, err := collect(rows)
	if err != nil {
		return nil, err
	}
	cur := make(map[string]bgtype.TaskMeta, len(ms))
	for _, m := range ms {
		cur[m.ID] = m
	}
	return cur, nil
}

// isKeyConflict reports whether err is the unique index on idempotency
// keys refusing a row.
func isKeyConflict(err error) bool {
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") && strings.Contains(s, "idempotency_key")
}

// duplicateKey reports the record that holds owner's key, which the unique
// index just found, as a *bgtype.DuplicateKeyError. The failed statement
// changed nothing; the caller rolls back the request.
func (w *writeTx) duplicateKey(owner, key string, cause error) error {
	var id string
	if err := w.tx.QueryRowContext(w.ctx, "SELECT id FROM tasks WHERE owner = ? AND idempotency_key = ?", owner, key).Scan(&id); err != nil {
		return fmt.Errorf("sqlitestore: %w (and reading the record that has the key: %v)", cause, err)
	}
	return &bgtype.DuplicateKeyError{Key: key, TaskID: id}
}

func addTo(set map[string]bool, id string) map[string]bool {
	if set == nil {
		set = make(map[string]bool)
	}
	set[id] = true
	return set
}

// withoutForeign returns a without the tasks whose ids belong to another
// owner, copying only when there are some: the caller's action is not
// changed.
func withoutForeign(a store.Action, foreign map[string]bool) store.Action {
	if len(foreign) == 0 {
		return a
	}
	kept := make([]bgtype.TaskMeta, 0, len(a.Tasks))
	for _, t := range a.Tasks {
		if !foreign[t.ID] {
			kept = append(kept, t)
		}
	}
	a.Tasks = kept
	if a.Op == store.OpUpsert && len(kept) == 0 {
		return store.Action{} // an unknown op: store.Apply ignores it
	}
	return a
}
