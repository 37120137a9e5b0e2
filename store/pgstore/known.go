package pgstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The Store keeps the records it wrote that are not terminal, with the
// version it wrote, as a read of their rows would return them. A commit
// whose actions name only such records (a task's completion, its
// progress) runs the reducer on them instead of reading and locking the
// rows first, and writes each row only if it still has that version: one
// round trip instead of two. When a row changed meanwhile (another
// instance cancelled or interrupted the task), nothing is written and the
// commit takes the long way, which reads the rows.

// errStale means a row a cached commit wrote no longer had the version
// the Store remembered, or the fence refused: nothing was written.
var errStale = errors.New("pgstore: cached record is stale")

// noteWritten remembers the records w left not terminal, so that their
// next commit needs no read, and forgets the others.
func (s *Store) noteWritten(w *writes) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	note := func(m *bgtype.TaskMeta, version int64) {
		if m.Status.IsTerminal() {
			delete(s.known, m.ID)
		} else if _, ok := s.known[m.ID]; ok || len(s.known) < maxKnown {
			s.known[m.ID] = row{meta: stored(*m), version: version}
		}
	}
	for _, m := range w.insMeta {
		note(m, 1)
	}
	for i, m := range w.updMeta {
		note(m, w.upd.version[i]+1)
	}
	for _, id := range w.delID {
		delete(s.known, id)
	}
}

// forget drops the records reqs name from the cache.
func (s *Store) forget(reqs []*commitReq) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	for _, r := range reqs {
		for _, id := range r.ids {
			delete(s.known, id)
		}
	}
}

// stored returns m as a read of the row written from it returns it:
// times in UTC to the microsecond, no tags as nil.
func stored(m bgtype.TaskMeta) bgtype.TaskMeta {
	ts := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.Truncate(time.Microsecond).UTC()
	}
	m.CreatedAt, m.StartedAt, m.FinishedAt = ts(m.CreatedAt), ts(m.StartedAt), ts(m.FinishedAt)
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	if m.Input != nil {
		in := *m.Input
		m.Input = &in
	}
	m.MoreInput = slices.Clone(m.MoreInput)
	if len(m.MoreInput) == 0 {
		m.MoreInput = nil
	}
	if m.Progress != nil {
		p := *m.Progress
		p.At = p.At.UTC()
		m.Progress = &p
	}
	return m
}

// cachedWrites returns what reqs write when no row needs reading: each
// record they name is cached (and of the request's owner), or new, and
// then the reducer makes it a record to insert (a spawn). It is worked
// out on the cached records, and may be written that way when it updates
// at least one row (its statement carries the fence), deletes none and
// has no ReplaceAll, and when its update and insert, after the counts
// held (those its transaction holds already), take owners' terminal counts
// in ascending order (prelock.go; the long way locks them first). An id
// that is not cached but exists after all makes the insert fail, and the
// commit takes the long way.
func (s *Store) cachedWrites(reqs []*commitReq, held []string) (*writes, []string, bool) {
	locked := make(map[string]row)
	fresh := make(map[string]bool)
	s.knownMu.Lock()
	for _, r := range reqs {
		if r.replace {
			s.knownMu.Unlock()
			return nil, nil, false
		}
		for _, id := range r.ids {
			k, ok := s.known[id]
			switch {
			case !ok:
				fresh[id] = true
			case k.meta.Owner != r.owner:
				s.knownMu.Unlock()
				return nil, nil, false
			default:
				locked[id] = k
			}
		}
	}
	s.knownMu.Unlock()
	w, retain, err := applyAll(locked, reqs)
	if err != nil || len(w.upd.id) == 0 || len(w.ins.id) != len(fresh) || len(w.delID) > 0 {
		return nil, nil, false
	}
	if prelockOwners(held, w.counted[countUpd], w.counted[countIns]) != nil {
		// Not with the counts locked first: the update would then wait
		// for rows while holding counts, the reverse of the long way.
		return nil, nil, false
	}
	return w, retain, true
}

// writeCached writes w in one round trip and one transaction (the
// implicit transaction of a batch): its updates, each compared-and-set on
// the cached version, its inserts, and the retention of the owners in
// retain. The update statement fails the
// transaction (a division by zero) unless it wrote every row and, on a
// started Store, the instance is alive; an insert fails it when the id or
// the idempotency key is taken. Then nothing is written and errStale is
// returned. Once it committed records that turned terminal, it checks the
// age limit (checkAge).
func (s *Store) writeCached(ctx context.Context, w *writes, retain []string) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return commitErr(err)
	}
	defer conn.Release()
	var b pgx.Batch // one implicit transaction: a failed statement undoes the others
	read := s.queueCached(&b, w, retain)
	br := conn.SendBatch(ctx, &b)
	err = read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cachedErr(cerr)
	}
	if err != nil {
		abort(ctx, conn)
		return err
	}
	if len(retain) > 0 {
		s.checkAge()
	}
	return nil
}

// queueCached adds writeCached's statements to b and returns the reader of
// their results, which returns errStale as writeCached does.
func (s *Store) queueCached(b *pgx.Batch, w *writes, retain []string) (read func(pgx.BatchResults) error) {
	args, sql, fenced := w.upd.args(), updateCheckedSQL, updateCheckedFencedSQL
	if len(w.upd.id) == 1 {
		args, sql, fenced = updateOneArgs(&w.upd), updateOneCheckedSQL, updateOneCheckedFencedSQL
	}
	if id := s.instance.Load(); id != nil {
		sql, args = fenced, append(args, *id)
	}
	args = append(args, int64(len(w.upd.id)))
	n0 := b.Len()
	b.Queue(sql, args...)
	switch {
	case len(w.ins.id) == 1 && !w.insMeta[0].Status.IsTerminal():
		b.Queue(insertOneSQL, oneArgs(w.insMeta[0])...)
	case len(w.ins.id) > 0:
		b.Queue(insertSQL, w.ins.args()...)
	}
	s.queueRetention(b, retain)
	n := b.Len() - n0
	return func(br pgx.BatchResults) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				return cachedErr(err)
			}
		}
		return nil
	}
}

// cachedErr is the error of a cached write's statement: errStale for the
// check or an id or key taken, else the database's error.
func cachedErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "22012" || pe.Code == "23505") {
		return errStale
	}
	return commitErr(err)
}

// updateCheckedSQL is updateSQL as one statement that fails with a
// division by zero unless it wrote $33 rows.
const updateCheckedSQL = `WITH u AS (` + updateSQL + ` RETURNING 1)
	SELECT 1 / ((SELECT count(*) FROM u) = $33::bigint)::int`

// updateCheckedFencedSQL is updateCheckedSQL with the fence of a started
// Store: it locks the registration of instance $33 as fenceSQL does and
// writes nothing unless it is alive, and fails unless it wrote $34 rows.
const updateCheckedFencedSQL = `WITH f AS (SELECT state FROM bgtask_instances WHERE id = $33 FOR KEY SHARE),
	u AS (` + updateSQL + ` AND (SELECT state FROM f) = 'alive' RETURNING 1)
	SELECT 1 / ((SELECT count(*) FROM u) = $34::bigint)::int`

// updateOneCheckedSQL and updateOneCheckedFencedSQL are the checked
// statements for one row: updateOneSQL, the instance being $22 and the
// count $22 or $23.
const (
	updateOneCheckedSQL = `WITH u AS (` + updateOneSQL + ` RETURNING 1)
	SELECT 1 / ((SELECT count(*) FROM u) = $22::bigint)::int`
	updateOneCheckedFencedSQL = `WITH f AS (SELECT state FROM bgtask_instances WHERE id = $22 FOR KEY SHARE),
	u AS (` + updateOneSQL + ` AND (SELECT state FROM f) = 'alive' RETURNING 1)
	SELECT 1 / ((SELECT count(*) FROM u) = $23::bigint)::int`
)
