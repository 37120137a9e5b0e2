package workpool

import (
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/gstate"
)

// job is an item of work: it reports which goroutine ran it, then waits
// for release (when set).
type job struct {
	n       int
	release chan struct{}
}

// ran is one job run: the goroutine (numbered from 1 in start order) and
// the job.
type ran struct{ g, n int }

// harness follows the protocol of Pool's doc: Hand, else start a
// goroutine that runs, parks, and calls Done.
type harness struct {
	p    Pool[job]
	ran  chan ran
	gids atomic.Int32
}

func newHarness(max int) *harness {
	h := &harness{ran: make(chan ran, 100)}
	h.p.SetMax(max)
	return h
}

func (h *harness) hand(j *job) {
	if !h.p.Hand(j) {
		go h.work(int(h.gids.Add(1)), j)
	}
}

func (h *harness) work(g int, j *job) {
	defer h.p.Done()
	var w *Worker[job]
	for j != nil {
		h.ran <- ran{g, j.n}
		if j.release != nil {
			<-j.release
		}
		j = h.p.Park(&w)
	}
}

// next returns the next run, which must have happened already.
func (h *harness) next(t *testing.T) ran {
	t.Helper()
	select {
	case r := <-h.ran:
		return r
	default:
		t.Fatal("no job ran")
		return ran{}
	}
}

// TestHandReusesTheParkedWorker: an item handed while a worker is parked
// runs on that worker's goroutine; with a bound of 0 nothing parks and
// each item gets a goroutine of its own.
func TestHandReusesTheParkedWorker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		max    int
		want   []ran
		parked int
	}{
		{"reused", 2, []ran{{1, 1}, {1, 2}, {1, 3}}, 1},
		{"bound 0", 0, []ran{{1, 1}, {2, 2}, {3, 3}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(tc.max)
				for i := range 3 {
					h.hand(&job{n: i + 1})
					synctest.Wait() // the job ran; its goroutine parked or exited
					if got := h.next(t); got != tc.want[i] {
						t.Fatalf("run %d: %+v, want %+v", i, got, tc.want[i])
					}
					if n := len(h.p.Parked()); n != tc.parked {
						t.Fatalf("run %d: %d parked, want %d", i, n, tc.parked)
					}
				}
				h.p.Close()
				if n := len(h.p.Parked()); n != 0 {
					t.Fatalf("%d parked after Close, want 0", n)
				}
			})
		})
	}
}

// TestParkedWorkerExpires: a worker that gets nothing exits after between
// one and two IdleTimeout periods, and the timer stops with it.
func TestParkedWorkerExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(4)
		h.hand(&job{n: 1})
		synctest.Wait()
		h.next(t)
		time.Sleep(IdleTimeout + IdleTimeout/2)
		synctest.Wait()
		if n := len(h.p.Parked()); n != 1 {
			t.Fatalf("%d parked after 1.5 periods, want 1", n)
		}
		time.Sleep(IdleTimeout)
		synctest.Wait()
		if n := len(h.p.Parked()); n != 0 {
			t.Fatalf("%d parked after 2.5 periods, want 0", n)
		}
		start := time.Now()
		h.p.Wait() // the worker has returned: no time passes
		if d := time.Since(start); d != 0 {
			t.Fatalf("Wait took %v of fake time, want 0", d)
		}
		h.hand(&job{n: 2})
		synctest.Wait()
		if got := h.next(t); got != (ran{2, 2}) {
			t.Fatalf("after expiry: %+v, want a new goroutine 2", got)
		}
		h.p.Close()
	})
}

// TestParkBound: when items end together, at most the bound of workers
// park; the others exit.
func TestParkBound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(2)
		release := make(chan struct{})
		for i := range 5 {
			h.hand(&job{n: i, release: release})
		}
		synctest.Wait()
		if g := h.gids.Load(); g != 5 {
			t.Fatalf("%d goroutines for 5 running items, want 5", g)
		}
		close(release)
		synctest.Wait()
		if n := len(h.p.Parked()); n != 2 {
			t.Fatalf("%d parked, want 2", n)
		}
		h.p.Close()
	})
}

// TestShutEndsParkedAndLateWorkers: Shut tells parked workers to exit at
// once, and a worker whose item ends after it exits instead of parking;
// Hand still starts goroutines.
func TestShutEndsParkedAndLateWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(4)
		h.hand(&job{n: 1})
		synctest.Wait()
		release := make(chan struct{})
		h.hand(&job{n: 2, release: release}) // takes the parked worker
		synctest.Wait()
		h.hand(&job{n: 3}) // none parked: a new goroutine, which parks
		synctest.Wait()
		if n := len(h.p.Parked()); n != 1 {
			t.Fatalf("%d parked before Shut, want 1", n)
		}
		h.p.Shut()
		h.p.Shut() // idempotent
		synctest.Wait()
		if n := len(h.p.Parked()); n != 0 {
			t.Fatalf("%d parked after Shut, want 0", n)
		}
		close(release)
		h.hand(&job{n: 4})
		synctest.Wait()
		if n := len(h.p.Parked()); n != 0 {
			t.Fatalf("%d parked after the late ends, want 0", n)
		}
		start := time.Now()
		h.p.Wait() // every worker has returned without its idle timer
		if d := time.Since(start); d != 0 {
			t.Fatalf("workers exited after %v of fake time, want 0", d)
		}
		var got []ran
		for range 4 {
			got = append(got, h.next(t))
		}
		want := []ran{{1, 1}, {1, 2}, {2, 3}, {3, 4}}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("runs %+v, want %+v", got, want)
			}
		}
	})
}

// TestParkNeverQueuesOnThePoolLock: a finished task's goroutine that finds
// the pool's lock taken and another goroutine waiting for it already (a
// burst of ends) exits at once rather than queue for the lock; so does one
// that finds the pool full.
func TestParkNeverQueuesOnThePoolLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		locked bool
		idle   int32
	}{
		{"lock taken, one waiting", true, 0},
		{"full", false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &Pool[job]{max: 4}
			p.idleN.Store(tc.idle)
			if tc.locked {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.parking.Store(1) // another goroutine waits for the lock
			}
			var w *Worker[job]
			if next := p.Park(&w); next != nil || w != nil {
				t.Fatalf("Park = %v, worker %v; want nil, none made", next, w)
			}
			if len(p.idle) != 0 {
				t.Fatalf("%d parked workers, want 0", len(p.idle))
			}
		})
	}
}

// TestParkYieldsBeforeBlocking: a worker that parks yields its P once
// after it joined the idle list and before it blocks (decision 750), so a
// Hand made meanwhile finds it runnable: the item goes into its channel
// and nobody is readied. With one P the worker runs until it yields, then
// this goroutine hands it an item; the race detector shuffles run queues,
// so the worker may run on and block first: some of the attempts must
// find it yielded (none did before). Not parallel: it sets GOMAXPROCS.
func TestParkYieldsBeforeBlocking(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 100 {
		if parkYielded(t) {
			return
		}
	}
	t.Fatal("in 100 attempts the parked worker was blocked when the next item came, never runnable (yielded)")
}

// parkYielded runs a worker until it parks and reports whether it was
// runnable, not blocked, when this goroutine next ran and handed it an
// item.
func parkYielded(t *testing.T) bool {
	h := newHarness(1)
	defer h.p.Close()
	h.hand(&job{n: 1}) // a new goroutine: it runs the job, then parks
	state := ""
	for i := 0; state == ""; i++ { // until the worker is in Park
		if i == 1000 {
			t.Fatal("the worker never parked")
		}
		runtime.Gosched()
		state = gstate.Of("github.com/bgtask/bgtask/internal/workpool.(*Pool[...]).Park(")
	}
	if n := len(h.p.Parked()); n != 1 {
		t.Fatalf("%d parked, want 1", n)
	}
	h.hand(&job{n: 2})
	for _, want := range []ran{{1, 1}, {1, 2}} {
		if got := <-h.ran; got != want {
			t.Fatalf("ran %+v, want %+v", got, want)
		}
	}
	return state == "runnable"
}
