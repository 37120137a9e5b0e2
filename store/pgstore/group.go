package pgstore

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/bgtask/bgtask/store"
)

// Group commit: concurrent Commits of one Store share transactions. A
// caller commits at once, alone, only when no transaction of commits is in
// flight (classic group commit: with fsync on, a commit costs a flush, and
// what queues behind the one in flight goes in its successor's flush);
// otherwise it queues, and the caller whose transaction ends next (or,
// on a fast path, has sent its COMMIT: opengroup.go) hands the queue (up
// to maxGroup callers) to the first caller in it, which commits them as
// one group and hands on in turn. On a fast path, the commits that queue
// during a transaction's first round trip, a lone caller's or a group's,
// join that transaction. Only while a full group
// (maxGroup) waits does another transaction start beside it, up to
// maxInFlight (fewer if the pool is smaller). No goroutine is started, and
// no caller waits for company: a lone caller's commit starts at once.
const (
	maxInFlight = 4
	maxGroup    = 256
)

// commitReq is one caller's Commit.
type commitReq struct {
	ctx     context.Context
	owner   string
	actions []store.Action
	ids     []string // the ids the actions name
	replace bool     // an action is a ReplaceAll
	done    chan outcome
	err     error // the outcome, set by the group's leader
}

// outcome is what a queued caller is told: its result, or a group to lead.
type outcome struct {
	err   error
	group []*commitReq
}

// grouper is the queue of a Store's waiting commits.
type grouper struct {
	limit   int        // groups in flight at most; set by Open
	mu      sync.Mutex // guards the fields below
	running int        // groups in flight
	queue   []*commitReq
}

// submit commits r, alone when a transaction slot is free, else in the
// group it waits for.
func (s *Store) submit(r *commitReq) error {
	g := &s.group
	g.mu.Lock()
	if g.running == 0 || g.running < g.limit && len(g.queue) >= maxGroup {
		g.running++
		g.mu.Unlock()
		return s.lead([]*commitReq{r}, r)
	}
	r.done = make(chan outcome, 1)
	g.queue = append(g.queue, r)
	g.mu.Unlock()
	var o outcome
	select {
	case o = <-r.done:
	case <-r.ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.queue, r); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
			g.mu.Unlock()
			return r.ctx.Err()
		}
		g.mu.Unlock()
		o = <-r.done // taken into a group already: its outcome comes
	}
	if o.group != nil {
		return s.lead(o.group, r)
	}
	return o.err
}

// lead commits group (which holds self), tells the others their results,
// hands the queue on (sooner when commitOpen does), and returns self's
// result.
func (s *Store) lead(group []*commitReq, self *commitReq) error {
	handed := false
	handOn := func() {
		if !handed {
			handed = true
			s.handOn()
		}
	}
	group = s.commitGroup(group, handOn)
	for _, r := range group {
		if r != self {
			r.done <- outcome{err: r.err}
		}
	}
	handOn()
	return self.err
}

// handOn gives the slot of a transaction whose statements are done to the
// first queued caller, with the queue's head (up to maxGroup) as its
// group, or frees it when nothing waits.
func (s *Store) handOn() {
	g := &s.group
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	n := min(len(g.queue), maxGroup)
	next := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	g.mu.Unlock()
	next[0].done <- outcome{group: next}
}

// commitGroup sets each request's err and returns the requests it
// committed: group, and the late arrivals that joined it (commitOpen,
// which may call handOn before the group's outcome is known). A lone
// request on a fast path opens a transaction too, with its own ctx, so
// that the commits that queue during its first round trip join it
// (decision 801); once one has, the rest of it runs without that ctx. A
// lone request that stays alone and fails commits again the lone way
// (commitRetry), which tells its cause. A group runs in one transaction
// that no single caller's ctx cancels; if it fails, each request commits
// alone, with its own ctx.
func (s *Store) commitGroup(group []*commitReq, handOn func()) []*commitReq {
	if len(group) == 1 && s.cfg.loneAlone {
		group[0].err = s.commitRetry(group[0].ctx, group)
		return group
	}
	ctx := context.WithoutCancel(group[0].ctx)
	if len(group) == 1 {
		ctx = group[0].ctx
	}
	all, err := s.commitOpen(ctx, group, handOn)
	s.countDeadlock(err)
	if len(all) == 1 {
		if err != nil {
			all[0].err = s.commitRetry(all[0].ctx, all)
		} else {
			all[0].err = nil
		}
		return all
	}
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		err = s.commitRetry(ctx, all)
	}
	if err == nil {
		s.groups.Add(1)
		s.grouped.Add(int64(len(all)))
		for _, r := range all {
			r.err = nil
		}
		return all
	}
	for _, r := range all {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		r.err = s.commitRetry(r.ctx, []*commitReq{r})
	}
	return all
}

// countDeadlock counts err when PostgreSQL ended its transaction to break
// a deadlock.
func (s *Store) countDeadlock(err error) {
	if errors.Is(err, errDeadlock) {
		s.deadlocks.Add(1)
	}
}
