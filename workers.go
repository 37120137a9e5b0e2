package bgtask

import (
	"context"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// workerIdle is how long a finished task's goroutine, parked as an idle
// worker, waits for the next task before it exits: between one and two of
// these.
const workerIdle = time.Second

// idleWorkersPerProc bounds the idle workers of a Manager: GOMAXPROCS
// times this many wait at most; a goroutine finishing a task beyond that
// exits.
const idleWorkersPerProc = 4

// workerPool keeps the goroutines of finished tasks for the next ones, so a
// short task costs neither a goroutine's start nor the growth of its first
// stack (docs/internals.md). A parked worker holds no task: only its
// channel and its stack, which the garbage collector shrinks like any
// other idle goroutine's. The zero value is an empty, open pool with no
// idle limit set; the Manager sets max.
type workerPool struct {
	max     int          // idle workers kept at most
	idleN   atomic.Int32 // len(idle), written with mu held: read without it as a hint
	parking atomic.Int32 // goroutines of park waiting for mu: at most one

	mu     sync.Mutex // guards the fields below
	idle   []*worker  // parked workers, the most recently parked last
	closed bool       // Shutdown began: no worker parks any more
	gen    uint64     // expiry rounds so far
	timer  *time.Timer
	armed  bool // timer runs: idle is not empty

	wg sync.WaitGroup // every worker goroutine; Shutdown waits for them
}

// worker is one parked goroutine.
type worker struct {
	next chan *Task // buffered 1: the next task, or nil to exit
	gen  uint64     // workerPool.gen when it parked
}

// idleWorkersMax is the idle limit of a new Manager's pool.
func idleWorkersMax() int { return runtime.GOMAXPROCS(0) * idleWorkersPerProc }

// start runs t on an idle worker, or on a new goroutine when none waits.
// t's m.wg count was taken when it registered.
func (m *Manager) start(t *Task) {
	p := &m.workers
	if p.idleN.Load() == 0 {
		// No idle worker (a burst has taken them all): a new goroutine,
		// without queueing on the lock with the workers that park. A
		// worker parking meanwhile waits for the next task.
		p.wg.Add(1)
		go m.work(t)
		return
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.idleN.Store(int32(n - 1))
		p.mu.Unlock()
		w.next <- t // never blocks: a parked worker's channel is empty
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go m.work(t)
}

// work is a worker goroutine: it runs t, then parks for the next task
// until it is told to exit. A task function that calls runtime.Goexit ends
// the worker (its end is still recorded: run defers it). Each task runs
// with the profiler labels of its spawn's context, not those the goroutine
// carried before, and a parked worker carries none.
func (m *Manager) work(t *Task) {
	defer m.workers.wg.Done()
	var w *worker
	for t != nil {
		pprof.SetGoroutineLabels(t.context())
		m.run(t)
		pprof.SetGoroutineLabels(context.Background())
		t = m.workers.park(&w)
	}
}

// park puts the calling worker (*wp, made on first use) on the idle list
// and waits for its next task; nil means exit: the pool is closed or full,
// another finished goroutine waits for its lock already, or nothing came
// for workerIdle.
func (p *workerPool) park(wp **worker) *Task {
	if int(p.idleN.Load()) >= p.max {
		return nil // full
	}
	if !p.mu.TryLock() {
		// One goroutine at a time waits for the lock (a spawn takes a
		// worker, or another parks); when one waits already (a burst
		// of ends), exit rather than queue with it: parking only saves
		// the next task a goroutine's start.
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
		w = &worker{next: make(chan *Task, 1)}
		*wp = w
	}
	w.gen = p.gen
	p.idle = append(p.idle, w)
	p.idleN.Store(int32(len(p.idle)))
	if !p.armed {
		p.armed = true
		if p.timer == nil {
			p.timer = time.AfterFunc(workerIdle, p.expire)
		} else {
			p.timer.Reset(workerIdle)
		}
	}
	p.mu.Unlock()
	return <-w.next
}

// expire runs every workerIdle while a worker is parked: it tells the
// workers parked since before the previous round to exit.
func (p *workerPool) expire() {
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
		p.timer.Reset(workerIdle)
	}
}

// shut tells every parked worker to exit, and makes the goroutine of every
// task that ends from now on exit instead of parking. Called when Shutdown
// begins: no new task is accepted any more, so a parked worker could only
// wait for its idle timer. The tasks still to start (queued ones that end
// cancelled) get goroutines of their own.
func (p *workerPool) shut() {
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

// close shuts the pool and waits for all workers, parked or not. Called by
// Shutdown once every task goroutine has returned, so no task starts any
// more.
func (p *workerPool) close() {
	p.shut()
	p.wg.Wait()
}
