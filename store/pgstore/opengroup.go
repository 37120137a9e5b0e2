package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Late arrivals: commits on the fast paths (new records, cached
// records), a group of several or one alone, are written in an explicit
// transaction of two round trips: BEGIN and the group's statements, then
// the statements of the commits that queued meanwhile and COMMIT. With a
// few submitters, a submitter's next spawn comes while the transaction
// after the one that committed its last spawn is in flight: if that
// transaction is still in its first round trip, the spawn rides its flush
// instead of the next one's. A late arrival waits for no one (its
// transaction is the next to flush anyway). Decision 732 has what it was
// measured to buy, decision 801 what a lone commit's second round trip
// buys.

// fastPlan is the statements of reqs' commit on a fast path, queued in a
// batch, and the reader of their results.
type fastPlan struct {
	w      *writes
	cached bool // written from cached records (counted in s.cached)
	ended  bool // records turned terminal: the age limit is checked after
	read   func(pgx.BatchResults) error
}

// planFast queues into b the statements of reqs' commit when it takes a
// fast path (freshInserts or cachedWrites), in a transaction that holds
// the terminal counts of held; ok is false when it takes the long way,
// and then b is unchanged.
func (s *Store) planFast(b *pgx.Batch, reqs []*commitReq, held []string) (p fastPlan, ok bool) {
	if w, one, ok := s.freshInserts(reqs); ok {
		return fastPlan{w: w, read: s.queueFresh(b, w, one)}, true
	}
	if w, retain, ok := s.cachedWrites(reqs, held); ok {
		read := s.queueCached(b, w, retain)
		return fastPlan{w: w, cached: true, ended: len(retain) > 0, read: read}, true
	}
	return fastPlan{}, false
}

// errLongWay means a group's commit does not take a fast path.
var errLongWay = errors.New("pgstore: commit takes the long way")

// commitOpen commits group (one caller or several) and the commits that
// queue while its statements run, in one transaction, and calls handOn once it
// has sent COMMIT: the next group's statements then run while this
// transaction's flush does. It returns every request it took (group
// first, in order) and the transaction's error; after an error nothing
// of them is written, and the caller commits them again (commitRetry),
// which tells each its cause. errLongWay: the group takes the long way.
func (s *Store) commitOpen(ctx context.Context, group []*commitReq, handOn func()) (all []*commitReq, err error) {
	var b pgx.Batch
	b.Queue("BEGIN")
	p1, ok := s.planFast(&b, group, nil)
	if !ok {
		return group, errLongWay
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return group, commitErr(err)
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, &b)
	_, err = br.Exec() // BEGIN
	if err == nil {
		err = p1.read(br)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = commitErr(cerr)
	}
	if err != nil {
		abort(ctx, conn)
		if errors.Is(err, errStale) {
			s.forget(group) // a row changed meanwhile: read it
		}
		return group, err
	}
	if h := s.afterOpen.Load(); h != nil {
		(*h)()
	}
	order := s.lockOrder(group)
	late := s.group.takeLate(group, maxGroup-len(group), func(r *commitReq) bool { return order.admits(s.countOwners(r)) })
	var (
		p2   fastPlan
		tail pgx.Batch
	)
	if len(late) > 0 {
		if p2, ok = s.planFast(&tail, late, p1.w.countedOwners()); !ok {
			s.group.putBack(late) // still ours to hand on: handOn follows
			late = nil
		}
	}
	all = append(group, late...)
	if len(late) > 0 {
		ctx = context.WithoutCancel(ctx) // no longer one caller's transaction
	}
	tail.Queue("COMMIT")
	br = conn.SendBatch(ctx, &tail)
	handOn()
	if len(late) > 0 {
		err = p2.read(br)
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("pgstore: commit: COMMIT answered %q", tag) // an aborted transaction answers ROLLBACK
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = commitErr(cerr)
	}
	if err != nil {
		abort(ctx, conn)
		if errors.Is(err, errStale) {
			s.forget(late)
		}
		return all, err
	}
	for _, p := range []fastPlan{p1, p2} {
		if p.w == nil {
			continue
		}
		if p.cached {
			s.cached.Add(1)
		}
		s.noteWritten(p.w)
	}
	s.late.Add(int64(len(late)))
	if p1.ended || p2.ended {
		s.checkAge()
	}
	return all, nil
}

// takeLate takes from the head of the queue up to max commits that name
// none of the records group names (nor does any of them replace all of
// an owner's records) and that admits (the lock order), to join group's
// open transaction. It stops at the
// first that does not qualify, so that the commits stay in the order the
// callers arrived.
func (g *grouper) takeLate(group []*commitReq, max int, admits func(*commitReq) bool) []*commitReq {
	named := make(map[string]bool)
	for _, r := range group {
		for _, id := range r.ids {
			named[id] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.queue {
		if n == max || r.replace || r.ctx.Err() != nil || namesAny(r, named) || !admits(r) {
			break
		}
		for _, id := range r.ids {
			named[id] = true
		}
		n++
	}
	late := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	return late
}

// namesAny reports whether r names a record of named.
func namesAny(r *commitReq, named map[string]bool) bool {
	for _, id := range r.ids {
		if named[id] {
			return true
		}
	}
	return false
}

// putBack returns late, taken by takeLate, to the head of the queue.
func (g *grouper) putBack(late []*commitReq) {
	g.mu.Lock()
	g.queue = slices.Insert(g.queue, 0, late...)
	g.mu.Unlock()
}
