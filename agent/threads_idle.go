package agent

import (
	"math"
	"time"
)

// idleTimer is the registry's one goroutine: it closes each thread nobody
// held for IdleTimeout, when its time comes, until Close. The idle list
// is in release order and every thread has the same timeout, so its front
// has the next deadline; a Release that makes the list non-empty kicks it.
func (r *Threads[T]) idleTimer() {
	defer close(r.done)
	timer := time.NewTimer(math.MaxInt64)
	defer timer.Stop()
	for {
		if next, ok := r.closeIdle(); ok {
			timer.Reset(time.Until(next))
		} else {
			timer.Stop()
		}
		select {
		case <-timer.C:
		case <-r.kick:
		case <-r.quit:
			return
		}
	}
}

// closeIdle closes the threads whose idle time is over, and returns the
// next deadline, if a thread is idle.
func (r *Threads[T]) closeIdle() (next time.Time, ok bool) {
	now := time.Now()
	var over []*Thread[T]
	r.mu.Lock()
	for !r.closed {
		front := r.idle.Front()
		if front == nil {
			break
		}
		th := front.Value.(*Thread[T])
		if next = th.released.Add(r.cfg.IdleTimeout); next.After(now) {
			ok = true
			break
		}
		r.detach(th)
		over = append(over, th)
	}
	r.mu.Unlock()
	for _, th := range over {
		r.closeThread(th, CloseIdle)
	}
	return next, ok
}
