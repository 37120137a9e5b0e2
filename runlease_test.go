package bgtask

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// leaseStore is a MemoryStore with run leases (store.RunLeaser), as one
// instance of a fleet sees them, whose CloseRun fails while fails > 0.
type leaseStore struct {
	*memstore.Store

	mu      sync.Mutex
	open    map[string]string   // owner -> open run
	carried map[string][]string // owner -> ends its closed run carries
	closed  map[string]string   // owner -> that closed run
	fails   int                 // CloseRun calls left to fail
	closes  int                 // CloseRun calls
	stops   []string            // RequestRunCancel calls: owner/run:reason
}

func newLeaseStore() *leaseStore {
	return &leaseStore{Store: memstore.New(), open: map[string]string{}, carried: map[string][]string{}, closed: map[string]string{}}
}

func (s *leaseStore) OpenRun(_ context.Context, owner, run, _ string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[owner] != "" {
		return nil, store.ErrRunHeld // as another instance would hold it: this test has one
	}
	s.open[owner] = run
	c := s.carried[owner]
	delete(s.carried, owner)
	delete(s.closed, owner)
	return c, nil
}

func (s *leaseStore) CloseRun(_ context.Context, owner, run, _ string, carried []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes++
	if s.fails > 0 {
		s.fails--
		return errors.New("db down")
	}
	switch {
	case s.open[owner] == run:
		delete(s.open, owner)
		if len(carried) > 0 {
			s.carried[owner], s.closed[owner] = slices.Clone(carried), run
		}
	case s.closed[owner] == run && len(carried) == 0: // the closed run's ends are handed out again
		delete(s.carried, owner)
		delete(s.closed, owner)
	}
	return nil
}

func (s *leaseStore) HeldRun(_ context.Context, owner string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[owner], "", nil
}

func (s *leaseStore) RequestRunCancel(_ context.Context, owner, run, reason, _ string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, owner+"/"+run+":"+reason)
	return "", nil
}

func (s *leaseStore) held(owner string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[owner]
}

// A lease whose release fails is released by retries in the background,
// with a backoff (100 ms, then doubling): the thread is not left held by
// this live instance until its next run here. A Shutdown ends the retries.
func TestFailedLeaseReleaseIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLeaseStore()
		m := newTestManager(t, WithStore(s), WithInstance("inst_a"))
		r, err := m.NewReceiver("alice", ReceiverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.fails = 3
		s.mu.Unlock()
		if err := r.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		if got := s.held("alice"); got != "run-1" {
			t.Fatalf("after the failed release the store holds %q, want run-1", got)
		}
		// Retries at +100 ms and +300 ms fail, the one at +700 ms lands.
		for _, step := range []struct {
			after  time.Duration
			held   string
			closes int
		}{{99 * time.Millisecond, "run-1", 1}, {2 * time.Millisecond, "run-1", 2}, {200 * time.Millisecond, "run-1", 3}, {400 * time.Millisecond, "", 4}} {
			time.Sleep(step.after)
			synctest.Wait()
			s.mu.Lock()
			closes := s.closes
			s.mu.Unlock()
			if got := s.held("alice"); got != step.held || closes != step.closes {
				t.Fatalf("after %v more: held %q, %d releases; want %q, %d", step.after, got, closes, step.held, step.closes)
			}
		}
		if err := r.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
			t.Fatalf("the next run: %v", err)
		}
		if err := r.RunEnd(t.Context(), RunOutcome{RunID: "run-2"}); err != nil {
			t.Fatal(err)
		}

		// A release that never lands is retried until Shutdown, which
		// waits for no store.
		s.mu.Lock()
		s.fails = 1 << 30
		s.mu.Unlock()
		if err := r.RunStart(t.Context(), RunInfo{RunID: "run-3"}); err != nil {
			t.Fatal(err)
		}
		if err := r.RunEnd(t.Context(), RunOutcome{RunID: "run-3"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatalf("Shutdown while a release is retried: %v", err)
		}
	})
}

// An aborted run's ends are carried by the lease to the owner's next run
// (on any instance): that run does not hand them out again, and its
// second boundary marks them heard. A Close in between hands them out
// again (the host forgot the conversation), and so does Undeliver.
func TestAbortedRunCarriedByTheLease(t *testing.T) {
	tests := []struct {
		name string
		// between runs on the "other instance": what happens to the first
		// Receiver after its aborted run.
		after     func(t *testing.T, r *Receiver)
		undeliver bool
		wantAgain bool // the next run hands the end out again
	}{
		{"carried", func(*testing.T, *Receiver) {}, false, false},
		{"receiver closed", func(t *testing.T, r *Receiver) {
			if err := r.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, false, true},
		{"undelivered", func(*testing.T, *Receiver) {}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseStore()
			ctx := t.Context()
			// Two Managers on one store stand for two instances.
			ma := newTestManager(t, WithStore(s), WithInstance("inst_a"))
			a, err := ma.NewReceiver("alice", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.RunStart(ctx, RunInfo{RunID: "run-1"}); err != nil {
				t.Fatal(err)
			}
			id, err := ma.Owner("alice").Spawn(ctx, func(context.Context, *Task) (any, error) { return "done", nil })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ma.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
			if evs := deliverAll(t, a, 1); evs[0].TaskID != id {
				t.Fatalf("run-1 handed %+v", evs)
			}
			if tt.undeliver {
				if n, err := a.Undeliver(); n != 1 || err != nil {
					t.Fatalf("Undeliver = %d, %v", n, err)
				}
			}
			if err := a.RunEnd(ctx, RunOutcome{RunID: "run-1", Aborted: true}); err != nil {
				t.Fatal(err)
			}
			tt.after(t, a)

			mb := newTestManager(t, WithStore(s), WithInstance("inst_b"))
			b, err := mb.NewReceiver("alice", ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.RunStart(ctx, RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			evs, err := b.Deliver(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if again := len(evs) == 1 && evs[0].TaskID == id; again != tt.wantAgain || len(evs) > 1 {
				t.Fatalf("run-2's first Deliver handed %+v; want the end again: %v", evs, tt.wantAgain)
			}
			if _, err := b.Deliver(ctx); err != nil { // the model answered run-2's first step
				t.Fatal(err)
			}
			meta, err := s.Get(ctx, id)
			if err != nil || !meta.Announced {
				t.Fatalf("after run-2's second step the end is not marked heard: %+v, %v", meta, err)
			}
			if err := b.RunEnd(ctx, RunOutcome{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// deliverAll delivers once and checks it got n events.
func deliverAll(t *testing.T, r *Receiver, n int) []bgtype.Event {
	t.Helper()
	evs, err := r.Deliver(t.Context())
	if err != nil || len(evs) != n {
		t.Fatalf("Deliver = %+v, %v; want %d events", evs, err, n)
	}
	return evs
}
