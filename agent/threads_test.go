package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// threadsLog records what a registry's hooks heard: the threads made (New)
// and closed (OnClose), in order, and how many Plugins of each thread are
// live at once.
type threadsLog struct {
	mu      sync.Mutex
	made    []string
	closed  []string // "id why", or "id why err" when the Plugin's Close failed
	at      []time.Time
	live    map[string]int
	maxLive int
}

// config returns a ThreadsConfig over l: the value of a thread is "v:" and
// its id.
func (l *threadsLog) config(maxThreads int, idle time.Duration) ThreadsConfig[string] {
	l.live = map[string]int{}
	return ThreadsConfig[string]{
		MaxThreads: maxThreads, IdleTimeout: idle,
		New: func(_ context.Context, thread string, p *Plugin) (string, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.made = append(l.made, thread)
			l.live[thread]++
			l.maxLive = max(l.maxLive, l.live[thread])
			return "v:" + thread, nil
		},
		OnClose: func(th *Thread[string], why CloseReason, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.live[th.ID()]--
			s := th.ID() + " " + why.String()
			if err != nil {
				s += " " + err.Error()
			}
			l.closed = append(l.closed, s)
			l.at = append(l.at, time.Now())
		},
	}
}

func (l *threadsLog) closedNow() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.closed)
}

// newThreads returns the registry of m with cfg, closed when the test ends.
func newThreads[T any](t testing.TB, m *bgtask.Manager, cfg ThreadsConfig[T]) *Threads[T] {
	t.Helper()
	r, err := NewThreads(m, cfg)
	if err != nil {
		t.Fatalf("NewThreads: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Threads.Close in cleanup: %v", err)
		}
	})
	return r
}

// acquire acquires thread of r and fails the test on an error.
func acquire[T any](t testing.TB, r *Threads[T], thread string) *Thread[T] {
	t.Helper()
	th, err := r.Acquire(t.Context(), thread)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", thread, err)
	}
	return th
}

// liveThreads returns the ids of r's live threads among ids.
func liveThreads[T any](r *Threads[T], ids ...string) []string {
	var out []string
	for _, id := range ids {
		if _, ok := r.Lookup(id); ok {
			out = append(out, id)
		}
	}
	return out
}

// At the cap, the thread made evicts the least recently released thread
// nobody holds; held threads are never evicted.
func TestThreadsEvictLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		steps  string // "+a" acquires a, "-a" releases it
		closed []string
		live   []string
	}{
		{"under the cap", "+a -a +b -b +c -c", nil, []string{"a", "b", "c"}},
		{"oldest release first", "+a -a +b -b +c -c +d -d", []string{"a evicted"}, []string{"b", "c", "d"}},
		{"a use moves it last", "+a -a +b -b +c -c +a -a +d -d +e", []string{"b evicted", "c evicted"}, []string{"a", "d", "e"}},
		{"release order, not acquire order", "+a +b -b -a +c -c +d", []string{"b evicted"}, []string{"a", "c", "d"}},
		{"held threads are skipped", "+a +b -b +c -c +d", []string{"b evicted"}, []string{"a", "c", "d"}},
		{"two holders, one release", "+a +a -a +b -b +c -c +d", []string{"b evicted"}, []string{"a", "c", "d"}},
		{"an evicted thread comes back", "+a -a +b -b +c -c +d -d +a", []string{"a evicted", "b evicted"}, []string{"a", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t)
			var log threadsLog
			r := newThreads(t, m, log.config(3, -1))
			var held []*Thread[string] // one per Acquire not released
			for step := range strings.FieldsSeq(tc.steps) {
				id := step[1:]
				if step[0] == '+' {
					held = append(held, acquire(t, r, id))
					continue
				}
				i := slices.IndexFunc(held, func(th *Thread[string]) bool { return th.ID() == id })
				held[i].Release()
				held = slices.Delete(held, i, i+1)
			}
			defer func() {
				for _, th := range held {
					th.Release()
				}
			}()
			if got := log.closedNow(); !slices.Equal(got, tc.closed) {
				t.Errorf("closed %q, want %q", got, tc.closed)
			}
			if got := liveThreads(r, "a", "b", "c", "d", "e"); !slices.Equal(got, tc.live) {
				t.Errorf("live %q, want %q", got, tc.live)
			}
			if r.Len() != len(tc.live) {
				t.Errorf("Len %d, want %d", r.Len(), len(tc.live))
			}
		})
	}
}

// When every live thread is held, a new thread is refused with
// ErrTooManyThreads and nothing changes; a live thread is still acquired;
// once one is released, the new thread evicts it.
func TestThreadsTooManyWhenAllHeld(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	var log threadsLog
	r := newThreads(t, m, log.config(2, -1))
	a, b := acquire(t, r, "a"), acquire(t, r, "b")
	th, err := r.Acquire(t.Context(), "c")
	if th != nil || !errors.Is(err, ErrTooManyThreads) || err.Error() != "agent: too many threads: every live thread is held" {
		t.Fatalf("Acquire(c) with a and b held: %v, %v; want ErrTooManyThreads", th, err)
	}
	if r.Len() != 2 || r.Held() != 2 || len(log.closedNow()) != 0 || !slices.Equal(log.made, []string{"a", "b"}) {
		t.Fatalf("after the refusal: Len %d Held %d closed %q made %q; want 2, 2, none, a b", r.Len(), r.Held(), log.closedNow(), log.made)
	}
	a2 := acquire(t, r, "a") // live: no room needed
	a2.Release()
	if r.Held() != 2 {
		t.Fatalf("a held twice, released once: Held %d, want 2", r.Held())
	}
	a.Release()
	c := acquire(t, r, "c")
	if got := log.closedNow(); !slices.Equal(got, []string{"a evicted"}) || r.Len() != 2 || r.Held() != 2 {
		t.Fatalf("c after a's release: closed %q Len %d Held %d; want a evicted, 2, 2", got, r.Len(), r.Held())
	}
	b.Release()
	c.Release()
	if r.Held() != 0 || r.Len() != 2 {
		t.Fatalf("all released: Held %d Len %d, want 0 and 2", r.Held(), r.Len())
	}
}

// Many goroutines acquire, run a turn of, and release four threads through
// a registry of two: threads are evicted and made again all the time, and
// the Manager's rule (one live Plugin per owner) is never broken: no
// ErrReceiverExists reaches a caller, no two Plugins of a thread live at
// once, every thread made is closed once.
func TestThreadsOnePluginAcrossEviction(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	var log threadsLog
	r, err := NewThreads(m, log.config(2, -1))
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				id := fmt.Sprint("t", (w+i)%4)
				th, err := r.Acquire(t.Context(), id)
				if errors.Is(err, ErrTooManyThreads) {
					continue // both live threads held by others: allowed, nothing to release
				}
				if err != nil {
					errs <- fmt.Errorf("Acquire(%s): %w", id, err)
					continue
				}
				if th.Value() != "v:"+id {
					errs <- fmt.Errorf("Acquire(%s): value %q", id, th.Value())
				}
				if i%3 == 0 {
					tu, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: fmt.Sprint("run-", w, "-", i)})
					if err != nil {
						errs <- fmt.Errorf("Turn(%s): %w", id, err)
					} else if err := tu.End(t.Context(), bgtask.RunOutcome{}); err != nil {
						errs <- fmt.Errorf("End(%s): %w", id, err)
					}
				}
				th.Release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("%v (ErrReceiverExists: %v)", err, errors.Is(err, bgtask.ErrReceiverExists))
	}
	if err := r.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.maxLive != 1 {
		t.Errorf("at most %d live Plugins of one thread at once, want 1", log.maxLive)
	}
	if len(log.made) != len(log.closed) || len(log.made) < 4 {
		t.Errorf("%d threads made, %d closed; want as many, at least 4", len(log.made), len(log.closed))
	}
	for id, n := range log.live {
		if n != 0 {
			t.Errorf("thread %s: %d Plugins left live", id, n)
		}
	}
	if r.Len() != 0 || r.Held() != 0 {
		t.Errorf("after Close: Len %d Held %d, want 0", r.Len(), r.Held())
	}
}

// Turns of one thread run one at a time, in the order they began waiting;
// a waiter whose ctx ends gets its cause and holds nothing: the turn goes
// to the next waiter.
func TestThreadsTurnsOneAtATime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var log threadsLog
		r := newThreads(t, m, log.config(0, -1))
		th := acquire(t, r, "a")
		defer th.Release()
		first, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		turn := func(ctx context.Context, run string) error {
			tu, err := th.Turn(ctx, bgtask.RunInfo{RunID: run})
			if err != nil {
				return err
			}
			mu.Lock()
			order = append(order, run)
			mu.Unlock()
			return tu.End(ctx, bgtask.RunOutcome{})
		}
		stop := errors.New("the client left")
		leaving, leave := context.WithCancelCause(t.Context())
		results := make(map[string]chan error)
		for _, run := range []string{"run-2", "run-gone", "run-3", "run-4"} {
			ctx := t.Context()
			if run == "run-gone" {
				ctx = leaving
			}
			results[run] = make(chan error, 1)
			go func() { results[run] <- turn(ctx, run) }()
			synctest.Wait() // waiting, in this order
		}
		leave(stop)
		if err := <-results["run-gone"]; err != stop {
			t.Fatalf("the waiter whose ctx ended: %v, want its cause %v", err, stop)
		}
		synctest.Wait()
		if len(order) != 0 {
			t.Fatalf("turns ran while run-1 was open: %q", order)
		}
		if err := first.End(t.Context(), bgtask.RunOutcome{}); err != nil {
			t.Fatal(err)
		}
		for _, run := range []string{"run-2", "run-3", "run-4"} {
			if err := <-results[run]; err != nil {
				t.Errorf("%s: %v", run, err)
			}
		}
		if want := []string{"run-2", "run-3", "run-4"}; !slices.Equal(order, want) {
			t.Errorf("turns in order %q, want %q", order, want)
		}
		if err := first.End(t.Context(), bgtask.RunOutcome{}); !errors.Is(err, bgtask.ErrNoRun) ||
			err.Error() != `agent: Turn.End: the turn of run "run-1" already ended: bgtask: no run started` {
			t.Errorf("a second End: %v, want ErrNoRun", err)
		}
		ended, cancel := context.WithCancelCause(t.Context())
		cancel(stop)
		if _, err := th.Turn(ended, bgtask.RunInfo{RunID: "run-5"}); err != stop {
			t.Errorf("Turn with an ended ctx and no turn running: %v, want its cause", err)
		}
		if err := turn(t.Context(), "run-6"); err != nil {
			t.Errorf("a turn after all: %v", err)
		}
	})
}

// A thread nobody held for IdleTimeout is closed then, to the nanosecond;
// an Acquire starts its time again; a held thread is never idle.
func TestThreadsIdleTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var log threadsLog
		r := newThreads(t, m, log.config(0, time.Minute))
		start := time.Now()
		held := acquire(t, r, "held")
		acquire(t, r, "a").Release()
		time.Sleep(30 * time.Second)
		b := acquire(t, r, "b")
		b.Release()
		acquire(t, r, "a").Release() // a's time starts again: 30 s
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if got := log.closedNow(); !slices.Equal(got, nil) {
			t.Fatalf("at 1m30s less 1ns: closed %q, want none", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := log.closedNow(); !slices.Equal(got, []string{"b idle", "a idle"}) {
			t.Fatalf("at 1m30s: closed %q, want b and a idle", got)
		}
		for i, at := range log.at {
			if d := at.Sub(start); d != 90*time.Second {
				t.Errorf("closed %s at %v, want 1m30s", log.closed[i], d)
			}
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got := liveThreads(r, "a", "b", "held"); !slices.Equal(got, []string{"held"}) || len(log.closedNow()) != 2 {
			t.Fatalf("two hours on: live %q closed %q; want held only", got, log.closedNow())
		}
		held.Release()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := log.closedNow(); len(got) != 3 || got[2] != "held idle" {
			t.Fatalf("a minute after its release: closed %q, want held idle last", got)
		}
		again := acquire(t, r, "a") // made anew
		again.Release()
		if !slices.Equal(log.made, []string{"held", "a", "b", "a"}) {
			t.Errorf("made %q, want held a b a", log.made)
		}
	})
}

// The defaults: 10,000 threads, 30 minutes; a negative IdleTimeout starts
// no goroutine; a negative MaxThreads or a nil Manager fails.
func TestNewThreadsConfig(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	r := newThreads(t, m, ThreadsConfig[int]{})
	if r.cfg.MaxThreads != 10_000 || r.cfg.IdleTimeout != 30*time.Minute || r.done == nil {
		t.Errorf("defaults: %d threads, %v, timer %v; want 10,000, 30m, a timer", r.cfg.MaxThreads, r.cfg.IdleTimeout, r.done != nil)
	}
	if never := newThreads(t, m, ThreadsConfig[int]{IdleTimeout: -1}); never.done != nil || never.kick != nil {
		t.Errorf("IdleTimeout -1: a timer goroutine; want none")
	}
	for _, tc := range []struct {
		m    *bgtask.Manager
		cfg  ThreadsConfig[int]
		want string
	}{
		{nil, ThreadsConfig[int]{}, "agent: NewThreads: nil manager"},
		{m, ThreadsConfig[int]{MaxThreads: -1}, "agent: NewThreads: MaxThreads is -1, want at least 1 (0 for the default, 10,000)"},
	} {
		if r, err := NewThreads(tc.m, tc.cfg); r != nil || err == nil || err.Error() != tc.want {
			t.Errorf("NewThreads(%v, %+v) = %v, %v; want %q", tc.m, tc.cfg, r, err, tc.want)
		}
	}
	if got := fmt.Sprint(CloseEvicted, CloseIdle, CloseShutdown, CloseReason(0)); got != "evicted idle shutdown CloseReason(0)" {
		t.Errorf("CloseReason strings %q", got)
	}
}

// Close closes every thread nobody holds at once, each held one at its
// Release, each Plugin once; it waits for them, and Acquire fails from
// then on with bgtask.ErrClosed.
func TestThreadsClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var log threadsLog
		r, err := NewThreads(m, log.config(0, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		held := acquire(t, r, "held")
		acquire(t, r, "a").Release()
		acquire(t, r, "b").Release()
		closed := make(chan error, 1)
		go func() { closed <- r.Close(t.Context()) }()
		synctest.Wait()
		if got := log.closedNow(); !slices.Equal(got, []string{"a shutdown", "b shutdown"}) {
			t.Fatalf("Close with held held: closed %q, want a and b", got)
		}
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while held is held", err)
		default:
		}
		if th, err := r.Acquire(t.Context(), "c"); th != nil || err != bgtask.ErrClosed {
			t.Fatalf("Acquire after Close: %v, %v; want bgtask.ErrClosed", th, err)
		}
		if th, err := r.Acquire(t.Context(), "held"); th != nil || err != bgtask.ErrClosed {
			t.Fatalf("Acquire of a live thread after Close: %v, %v; want bgtask.ErrClosed", th, err)
		}
		held.Release()
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got := log.closedNow(); !slices.Equal(got, []string{"a shutdown", "b shutdown", "held shutdown"}) {
			t.Fatalf("closed %q, want a, b, held, once each", got)
		}
		if err := held.Plugin().RunStart(t.Context(), bgtask.RunInfo{RunID: "r"}); !errors.Is(err, bgtask.ErrClosed) {
			t.Errorf("the closed thread's Plugin: RunStart %v, want ErrClosed", err)
		}
		for _, id := range []string{"a", "b", "held"} { // the Manager's owners are free again
			p, err := NewPlugin(m, id, Config{})
			if err != nil {
				t.Fatalf("NewPlugin(%s) after Close: %v", id, err)
			}
			_ = p.Close(t.Context())
		}
		if err := r.Close(t.Context()); err != nil || r.Len() != 0 || r.Held() != 0 {
			t.Errorf("Close again: %v, Len %d, Held %d; want nil, 0, 0", err, r.Len(), r.Held())
		}
	})
}

// A Close whose ctx ends while a thread is held returns the ctx's cause;
// the thread is closed at its Release all the same.
func TestThreadsCloseDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var log threadsLog
		r, err := NewThreads(m, log.config(0, -1))
		if err != nil {
			t.Fatal(err)
		}
		held := acquire(t, r, "held")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := r.Close(ctx); err != context.DeadlineExceeded || time.Since(start) != 10*time.Second {
			t.Fatalf("Close with held held: %v after %v; want the deadline after 10s", err, time.Since(start))
		}
		held.Release()
		if got := log.closedNow(); !slices.Equal(got, []string{"held shutdown"}) {
			t.Fatalf("closed %q, want held at its release", got)
		}
		if err := r.Close(t.Context()); err != nil {
			t.Fatalf("Close again: %v", err)
		}
	})
}

// A run of the thread open elsewhere (in a fleet: on another instance; here
// a run opened on the Plugin outside the registry): Turn returns the
// Plugin's bgtask.ErrRunOpen unchanged, once, and leaves the turn free and
// nothing held but the caller's Acquire.
func TestThreadsTurnRunOpen(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	var log threadsLog
	r := newThreads(t, m, log.config(0, -1))
	th := acquire(t, r, "a")
	if err := th.Plugin().RunStart(t.Context(), bgtask.RunInfo{RunID: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	tu, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: "mine"})
	if tu != nil || err != bgtask.ErrRunOpen {
		t.Fatalf("Turn with a run open: %v, %v; want bgtask.ErrRunOpen unchanged", tu, err)
	}
	th.Release()
	if r.Held() != 0 || r.Len() != 1 || len(log.made) != 1 || len(log.closedNow()) != 0 {
		t.Fatalf("after the refusal: Held %d Len %d made %q closed %q; want 0, 1, a, none", r.Held(), r.Len(), log.made, log.closedNow())
	}
	if err := th.Plugin().RunEnd(t.Context(), bgtask.RunOutcome{RunID: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	th = acquire(t, r, "a")
	defer th.Release()
	tu, err = th.Turn(t.Context(), bgtask.RunInfo{RunID: "mine"}) // the turn is free: no wait
	if err != nil {
		t.Fatalf("Turn once the other run ended: %v", err)
	}
	if err := tu.End(t.Context(), bgtask.RunOutcome{RunID: "other"}); !errors.Is(err, bgtask.ErrNoRun) ||
		err.Error() != `agent: Turn.End: run "other", the turn's is "mine": bgtask: no run started` {
		t.Errorf("End of another run: %v", err)
	}
	if err := tu.End(t.Context(), bgtask.RunOutcome{RunID: "mine"}); err != nil {
		t.Errorf("End: %v", err)
	}
}

// A task's end that reaches a thread while it is evicted, or that the
// evicted Plugin held undelivered, is delivered once by the thread's next
// Plugin, at its first turn.
func TestThreadsEndHeardOnceAcrossEviction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		endBefore bool // the task ends before the eviction: the first Plugin keeps it
	}{
		{"ends while evicted", false},
		{"ends before the eviction", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				woken := make(chan string, 4)
				cfg := ThreadsConfig[string]{MaxThreads: 1, IdleTimeout: -1,
					OnWake: func(th *Thread[string], ev bgtype.Event) { woken <- th.ID() + " " + string(ev.Kind) }}
				r := newThreads(t, m, cfg)
				th := acquire(t, r, "a")
				tu, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: "run-1"})
				if err != nil {
					t.Fatal(err)
				}
				id, probe := spawnProbe(t, t.Context(), th.Plugin().Owner())
				if err := tu.End(t.Context(), bgtask.RunOutcome{}); err != nil {
					t.Fatal(err)
				}
				th.Release()
				if tc.endBefore {
					close(probe.release)
					if got := <-woken; got != "a completed" {
						t.Fatalf("woken %q, want a completed", got)
					}
				}
				acquire(t, r, "b").Release() // evicts a
				if _, ok := r.Lookup("a"); ok {
					t.Fatal("a live after b was made at MaxThreads 1")
				}
				if !tc.endBefore {
					close(probe.release)
					waitTask(t, m, id)
					synctest.Wait()
				}
				th = acquire(t, r, "a") // evicts b
				defer th.Release()
				var heard []string
				for run := range 2 {
					tu, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: fmt.Sprint("run-next-", run)})
					if err != nil {
						t.Fatal(err)
					}
					msgs, err := th.Plugin().BeforeInference(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					heard = append(heard, eventIDs(msgs)...)
					if err := tu.End(t.Context(), bgtask.RunOutcome{}); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(heard, []string{id}) {
					t.Errorf("the next Plugin's two turns heard %q, want %s once", heard, id)
				}
				close(woken)
				for w := range woken {
					t.Errorf("woken again: %q", w)
				}
			})
		})
	}
}

// New's error, or a panic in New or Config, fails the Acquire: nothing is
// held or live, the Plugin is closed (the owner is free on the Manager),
// the panic logged; a panic in OnClose is logged, the thread closed all
// the same.
func TestThreadsHookFailures(t *testing.T) {
	t.Parallel()
	errNew := errors.New("no tools today")
	for _, tc := range []struct {
		name    string
		cfg     ThreadsConfig[int]
		want    string
		wantIs  error
		logged  string
		closeOK bool
	}{
		{"New fails", ThreadsConfig[int]{New: func(context.Context, string, *Plugin) (int, error) { return 0, errNew }},
			`agent: Threads: thread "a": no tools today`, errNew, "", true},
		{"New panics", ThreadsConfig[int]{New: func(context.Context, string, *Plugin) (int, error) { panic("boom") }},
			`agent: Threads: thread "a": New panicked: boom`, nil, "hook=New", true},
		{"Config panics", ThreadsConfig[int]{Config: func(string) Config { panic("bad config") }},
			`agent: Threads: thread "a": Config panicked: bad config`, nil, "hook=Config", true},
		{"a bad config", ThreadsConfig[int]{Config: func(string) Config { return Config{Display: -1} }},
			`agent: Threads: thread "a": agent: NewPlugin: Config.Display is -1, want 1 to 2147483647 (0 for the default)`, nil, "", true},
		{"blank thread", ThreadsConfig[int]{}, "agent: Threads: " + bgtype.ErrInvalidOwner.Error(), bgtype.ErrInvalidOwner, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t)
			var logged strings.Builder
			var logMu sync.Mutex
			tc.cfg.Logger = newTestLogger(&logMu, &logged)
			r := newThreads(t, m, tc.cfg)
			id := "a"
			if tc.name == "blank thread" {
				id = " "
			}
			th, err := r.Acquire(t.Context(), id)
			if th != nil || err == nil || err.Error() != tc.want || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Fatalf("Acquire: %v, %v; want %q", th, err, tc.want)
			}
			if r.Len() != 0 || r.Held() != 0 {
				t.Errorf("after the failure: Len %d Held %d, want 0", r.Len(), r.Held())
			}
			logMu.Lock()
			if got := logged.String(); (tc.logged == "") != (got == "") || !strings.Contains(got, tc.logged) {
				t.Errorf("logged %q, want %q", got, tc.logged)
			}
			logMu.Unlock()
			if p, err := NewPlugin(m, "a", Config{}); err != nil {
				t.Errorf("NewPlugin(a) after the failure: %v; want the owner free", err)
			} else {
				_ = p.Close(t.Context())
			}
		})
	}
	t.Run("OnClose panics", func(t *testing.T) {
		t.Parallel()
		m := newTestManager(t)
		var logged strings.Builder
		var logMu sync.Mutex
		r := newThreads(t, m, ThreadsConfig[int]{MaxThreads: 1, IdleTimeout: -1, Logger: newTestLogger(&logMu, &logged),
			OnClose: func(*Thread[int], CloseReason, error) { panic("close boom") }})
		acquire(t, r, "a").Release()
		acquire(t, r, "b").Release() // evicts a: OnClose panics
		acquire(t, r, "a").Release() // a made anew
		if got := liveThreads(r, "a", "b"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("live %q, want a", got)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if got := logged.String(); strings.Count(got, "hook=OnClose") != 2 || !strings.Contains(got, "panic=\"close boom\"") {
			t.Errorf("logged %q, want two OnClose panics", got)
		}
	})
}

// An event that arrives while New runs is handed to OnWake once New
// returned, with the thread's value; later ones at once.
func TestThreadsWakeDuringNew(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		probe := newProbe()
		id, err := m.Owner("a").Spawn(t.Context(), probe.fn)
		if err != nil {
			t.Fatal(err)
		}
		<-probe.started
		var mu sync.Mutex
		var woken []string
		r := newThreads(t, m, ThreadsConfig[string]{IdleTimeout: -1,
			New: func(context.Context, string, *Plugin) (string, error) {
				close(probe.release)
				synctest.Wait() // the end reached the Plugin, whose thread is not made yet
				mu.Lock()
				defer mu.Unlock()
				if len(woken) != 0 {
					t.Errorf("OnWake called during New: %q", woken)
				}
				return "value", nil
			},
			OnWake: func(th *Thread[string], ev bgtype.Event) {
				mu.Lock()
				defer mu.Unlock()
				woken = append(woken, th.Value()+" "+ev.TaskID+" "+string(ev.Kind))
			}})
		th := acquire(t, r, "a")
		defer th.Release()
		mu.Lock()
		got := slices.Clone(woken)
		mu.Unlock()
		if want := []string{"value " + id + " completed"}; !slices.Equal(got, want) {
			t.Fatalf("once Acquire returned: woken %q, want %q", got, want)
		}
		id2 := spawnFor(t, m, "a", doneTask)
		waitTask(t, m, id2)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"value " + id + " completed", "value " + id2 + " completed"}; !slices.Equal(woken, want) {
			t.Errorf("woken %q, want %q", woken, want)
		}
	})
}

// An Acquire waiting for a thread being closed or made gives up with its
// ctx's cause, holding nothing; a caller whose ctx ended makes nothing.
func TestThreadsAcquireCanceled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		entered, unblock := make(chan struct{}), make(chan struct{})
		r := newThreads(t, m, ThreadsConfig[int]{IdleTimeout: -1,
			New: func(ctx context.Context, thread string, _ *Plugin) (int, error) {
				if thread == "slow" {
					close(entered)
					<-unblock
				}
				return 1, nil
			}})
		made := make(chan error, 1)
		go func() {
			th, err := r.Acquire(t.Context(), "slow")
			if err == nil {
				th.Release()
			}
			made <- err
		}()
		<-entered
		if _, ok := r.Lookup("slow"); ok || r.Len() != 0 {
			t.Fatalf("a thread visible while New runs: Len %d", r.Len())
		}
		cause := errors.New("client gone")
		ctx, cancel := context.WithCancelCause(t.Context())
		waited := make(chan error, 1)
		go func() {
			_, err := r.Acquire(ctx, "slow")
			waited <- err
		}()
		synctest.Wait()
		cancel(cause)
		if err := <-waited; err != cause {
			t.Fatalf("the waiter: %v, want its cause", err)
		}
		if th, err := r.Acquire(ctx, "other"); th != nil || err != cause || r.Len() != 0 {
			t.Fatalf("Acquire with an ended ctx: %v, %v, Len %d; want its cause, nothing made", th, err, r.Len())
		}
		close(unblock)
		if err := <-made; err != nil {
			t.Fatal(err)
		}
		if r.Held() != 0 || r.Len() != 1 {
			t.Errorf("Held %d Len %d, want 0 and 1", r.Held(), r.Len())
		}
	})
}

// Release of a thread nobody holds panics.
func TestThreadsReleaseUnheld(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	r := newThreads(t, m, ThreadsConfig[int]{IdleTimeout: -1})
	th := acquire(t, r, "a")
	th.Release()
	defer func() {
		if v := recover(); v != `agent: Thread.Release of "a", which is not held` {
			t.Errorf("a Release too many: recovered %v", v)
		}
	}()
	th.Release()
}

// A stop of a turn's run (Owner.StopRun, here; in a fleet it is carried
// from another instance) ends Turn.Context with a *bgtask.RunStoppedError
// carrying the reason; the ctx given to Turn is not cancelled. Another
// run's stop, and End, leave a turn's context as the caller's.
func TestThreadsTurnContextEndsOnStop(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	var log threadsLog
	r := newThreads(t, m, log.config(0, -1))
	th := acquire(t, r, "a")
	defer th.Release()
	tu, err := th.Turn(t.Context(), bgtask.RunInfo{RunID: "turn-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Owner("a").CancelRun("another-run"); err != nil {
		t.Fatal(err)
	}
	if err := tu.Context().Err(); err != nil {
		t.Fatalf("the turn's context after another run's cancel: %v", err)
	}
	stop, err := m.Owner("a").StopRun(t.Context(), "deploy freeze")
	if err != nil || stop.RunID != "turn-1" {
		t.Fatalf("StopRun = %+v, %v", stop, err)
	}
	<-tu.Context().Done()
	cause, ok := errors.AsType[*bgtask.RunStoppedError](context.Cause(tu.Context()))
	if !ok || cause.Reason != "deploy freeze" || !bgtask.RunStopped(tu.Context()) {
		t.Fatalf("the turn's cause: %v; want a RunStoppedError with the reason", context.Cause(tu.Context()))
	}
	if t.Context().Err() != nil {
		t.Fatal("the caller's context was cancelled")
	}
	if err := tu.End(t.Context(), bgtask.RunOutcome{Canceled: true, Reason: cause.Reason}); err != nil {
		t.Fatal(err)
	}

	tu, err = th.Turn(t.Context(), bgtask.RunInfo{RunID: "turn-2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tu.End(t.Context(), bgtask.RunOutcome{}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(tu.Context()), context.Canceled) || bgtask.RunStopped(tu.Context()) {
		t.Fatalf("an ended turn's cause: %v; want context.Canceled", context.Cause(tu.Context()))
	}
}
