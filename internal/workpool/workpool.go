package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// IdleTimeout is how long a parked worker waits for its next item before
// it is told to exit: between one and two of these.
const IdleTimeout = time.Second

// IdlePerProc bounds the parked workers of a pool made with DefaultMax:
// GOMAXPROCS times this many wait at most.
const IdlePerProc = 4

// DefaultMax returns the idle bound for a new pool: GOMAXPROCS times
// IdlePerProc.
func DefaultMax() int { return runtime.GOMAXPROCS(0) * IdlePerProc }

// Pool keeps the goroutines that finished an item of work (a task) for the
// next items, so a short item costs neither a goroutine's start nor the
// growth of its first stack. A parked worker holds no item: only its
// channel and its stack, which the garbage collector shrinks like any
// other idle goroutine's.
//
// The caller owns the goroutines; the pool counts them and tells them
// what to do next. The protocol: [Pool.Hand] gives an item to a parked
// worker, or, when none waits, counts one more goroutine and returns
// false, and the caller starts one (go) that runs the item, calls
// [Pool.Park] for each next item until it returns nil, and calls
// [Pool.Done] when it returns.
//
// The zero value is an open pool that parks no worker (its bound is 0);
// [Pool.SetMax] sets the bound before first use. Hand, Park, Done, Shut,
// Close and Wait are safe for concurrent use. A Pool must not be copied
// after first use.
type Pool[T any] struct {
	max     int          // parked workers kept at most; set before first use
	idleN   atomic.Int32 // len(idle), written with mu held: read without it as a hint
	parking atomic.Int32 // goroutines of Park waiting for mu: at most one

	mu     sync.Mutex   // guards the fields below
	idle   []*Worker[T] // parked workers, the most recently parked last
	closed bool         // Shut was called: no worker parks any more
	gen    uint64       // expiry rounds so far
	timer  *time.Timer
	armed  bool // timer runs: idle is not empty

	wg sync.WaitGroup // every worker goroutine; Wait waits for them
}

// Worker is one worker goroutine's parking place, made by its first
// [Pool.Park]. Its zero value is not used: a worker holds a nil *Worker
// until then.
type Worker[T any] struct {
	next chan *T // buffered 1: the next item, or nil to exit
	gen  uint64  // Pool.gen when it parked
}

// SetMax sets how many workers park at most; a worker whose item ends
// while that many wait exits. Call it before the pool's first use: it is
// not synchronised with the other methods. A bound of 0 or less parks no
// worker.
func (p *Pool[T]) SetMax(n int) { p.max = n }

// Hand gives t to the most recently parked worker and returns true. When
// no worker is parked (a burst has taken them all), it counts one more
// worker goroutine and returns false, without queueing on the pool's lock
// with the workers that park: the caller must then start the goroutine
// that runs t (see [Pool]). t must not be nil. Hand never blocks on a
// worker.
func (p *Pool[T]) Hand(t *T) bool {
	if p.idleN.Load() == 0 {
		p.wg.Add(1)
		return false
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.idleN.Store(int32(n - 1))
		p.mu.Unlock()
		w.next <- t // never blocks: a parked worker's channel is empty
		return true
	}
	p.wg.Add(1)
	p.mu.Unlock()
	return false
}

// Park puts the calling worker (*wp, made on first use) on the idle list
// and waits for its next item. It returns nil when the worker should
// exit: the pool is shut or full, another finished goroutine waits for
// the pool's lock already (a burst of ends: parking only saves the next
// item a goroutine's start, so it exits rather than queue), or nothing
// came for IdleTimeout. A worker that got nil must not call Park again.
// Once on the idle list it yields the processor once (runtime.Gosched)
// before it blocks, so a Hand made meanwhile by the goroutine that ran
// finds it runnable and readies nobody.
func (p *Pool[T]) Park(wp **Worker[T]) *T {
	if int(p.idleN.Load()) >= p.max {
		return nil // full
	}
	if !p.mu.TryLock() {
		// One goroutine at a time waits for the lock (a Hand takes a
		// worker, or another parks); when one waits already, exit
		// rather than queue with it.
		if p.parking.Add(1) > 1 {
			p.parking.Add(-1)
			return nil
		}
		p.mu.Lock()
		p.parking.Add(-1)
	}
	if p.closed || len(p.idle) >= p.max {
		p.mu.Unlock()
		return nil
	}
	w := *wp
	if w == nil {
		w = &Worker[T]{next: make(chan *T, 1)}
		*wp = w
	}
	w.gen = p.gen
	p.idle = append(p.idle, w)
	p.idleN.Store(int32(len(p.idle)))
	if !p.armed {
		p.armed = true
		if p.timer == nil {
			p.timer = time.AfterFunc(IdleTimeout, p.expire)
		} else {
			p.timer.Reset(IdleTimeout)
		}
	}
	p.mu.Unlock()
	// Yield once before blocking: the goroutine this worker's task woke
	// (or let go on) runs now, and a Hand it makes meanwhile finds the
	// worker runnable, not blocked, so it readies nobody (decision 750).
	runtime.Gosched()
	return <-w.next
}

// Done records that a worker goroutine counted by Hand returns.
func (p *Pool[T]) Done() { p.wg.Done() }

// expire runs every IdleTimeout while a worker is parked: it tells the
// workers parked since before the previous round to exit.
func (p *Pool[T]) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.gen++
	kept := p.idle[:0]
	for _, w := range p.idle {
		if p.gen-w.gen >= 2 {
			w.next <- nil
		} else {
			kept = append(kept, w)
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.idleN.Store(int32(len(kept)))
	p.armed = len(kept) > 0
	if p.armed {
		p.timer.Reset(IdleTimeout)
	}
}

// Shut tells every parked worker to exit, and makes every worker that
// calls Park from now on exit instead of parking; it stops the idle timer.
// Hand still works (it starts goroutines of their own). Shut is
// idempotent and does not wait: see Close.
func (p *Pool[T]) Shut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, w := range p.idle {
		w.next <- nil
	}
	clear(p.idle)
	p.idle = nil
	p.idleN.Store(0)
	if p.timer != nil {
		p.timer.Stop()
	}
}

// Wait waits until every worker goroutine counted by Hand has called
// Done. It does not shut the pool: a parked worker returns only when told
// to exit (Shut, or its idle time).
func (p *Pool[T]) Wait() { p.wg.Wait() }

// Close shuts the pool and waits for all its workers, parked or not. Call
// it once no item is handed any more.
func (p *Pool[T]) Close() {
	p.Shut()
	p.wg.Wait()
}

// Parked returns the parked workers, the most recently parked last: a
// snapshot, for tests and diagnostics.
func (p *Pool[T]) Parked() []*Worker[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Worker[T](nil), p.idle...)
}
