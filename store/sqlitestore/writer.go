package sqlitestore

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/store"
)

// A request is one Commit call waiting for the writer.
type request struct {
	owner   string
	actions []store.Action
	state   atomic.Int32 // pending, taken or abandoned: who may touch actions
	done    chan error   // capacity 1: the outcome, once the batch is written
}

const (
	pending   int32 = iota
	taken           // the writer owns the request and will answer on done
	abandoned       // the caller's ctx ended first: the writer skips it
)

// Commit implements store.Store. The actions are checked in the caller's
// goroutine (an invalid one fails this call only and changes nothing), then
// queued for the writer, which applies them with store.Apply in a
// transaction shared with other concurrent calls, under a savepoint of
// their own: each call gets its own outcome, all or none of its actions.
//
// If ctx ends while the call is still queued, it is withdrawn and Commit
// returns ctx's error with nothing written. Once the writer has taken it,
// Commit waits for the transaction (bounded by the busy timeout) and
// returns its outcome, so that it never returns while the actions are in
// use. After Close it returns ErrClosed.
func (s *Store) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateCommit(owner, actions...); err != nil {
		return err
	}
	if len(actions) == 0 {
		if s.isClosed() {
			return ErrClosed
		}
		return nil
	}
	r := &request{owner: owner, actions: actions, done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	s.signal()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(pending, abandoned) {
			return ctx.Err()
		}
		return <-r.done
	}
}

// signal wakes the writer without blocking; one pending wake is enough.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine, started by Open and joined by Close. It
// writes every request accepted before Close, then returns.
func (s *Store) run() {
	var batch []*request
	for range s.wake {
		for {
			var closed bool
			batch, closed = s.take(batch[:0])
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			if s.cfg.batchDelay > 0 && len(batch) < s.cfg.maxBatch && !closed {
				batch = s.fill(batch)
			}
			if s.cfg.hookTaken != nil {
				s.cfg.hookTaken(len(batch))
			}
			s.flush(batch)
			if len(batch) > 1 {
				// Concurrent callers: let the ones just answered run and
				// queue their next Commit, so that the next batch takes them
				// together instead of one now and the rest after it.
				for range 8 {
					runtime.Gosched()
					if s.queued() >= len(batch) {
						break
					}
				}
			}
			clear(batch) // let the requests go
		}
	}
}

// take moves up to the batch limit of queued requests into batch, skipping
// abandoned ones, and reports whether the Store is closed.
func (s *Store) take(batch []*request) ([]*request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.queue {
		if len(batch) == s.cfg.maxBatch {
			break
		}
		n++
		if r.state.CompareAndSwap(pending, taken) {
			batch = append(batch, r)
		}
	}
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	return batch, s.closed
}

// fill waits up to the batch delay for more requests, until the batch is
// full or the Store closes.
func (s *Store) fill(batch []*request) []*request {
	timer := time.NewTimer(s.cfg.batchDelay)
	defer timer.Stop()
	for len(batch) < s.cfg.maxBatch {
		select {
		case <-timer.C:
			return batch
		case <-s.wake:
			var closed bool
			batch, closed = s.take(batch)
			if closed {
				s.signal() // the outer loop must see the close too
				return batch
			}
		}
	}
	return batch
}

// flush writes a batch in one transaction and answers each request.
func (s *Store) flush(batch []*request) {
	errs := s.writeBatch(context.Background(), batch)
	for i, r := range batch {
		if errs[i] != nil {
			s.cfg.logger.Warn("sqlitestore: commit failed", "owner", r.owner, "err", errs[i])
		}
		r.done <- errs[i]
	}
}

// queued is the number of Commit calls waiting for the writer.
func (s *Store) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// writeBatch writes a batch in one transaction and returns each request's
// error: without savepoints first, and again with one per request if a
// request failed after it wrote (see write).
func (s *Store) writeBatch(ctx context.Context, batch []*request) []error {
	errs, retry := s.write(ctx, batch, false)
	if retry {
		errs, _ = s.write(ctx, batch, true)
	}
	return errs
}
