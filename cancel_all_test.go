package bgtask

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// TestCancelAll: every live task of every owner, detached and queued ones
// included, is cancelled with the given cause (and reason); the Manager
// stays open. The host's Manager.CancelAll and the stores' view
// (Runtime().CancelAll, when the instance lost its registration) alike.
func TestCancelAll(t *testing.T) {
	host := func(opts ...CancelOption) func(*Manager) int {
		return func(m *Manager) int {
			n, err := m.CancelAll(opts...)
			if err != nil {
				panic(err)
			}
			return n
		}
	}
	for _, tc := range []struct {
		name       string
		cancel     func(*Manager) int
		want       error
		wantErr    string
		wantReason string
	}{
		{"host", host(), ErrCanceled, ErrCanceled.Error(), ""},
		{"host with reason", host(WithReason("maintenance")), ErrCanceled, ErrCanceled.Error() + ": maintenance", "maintenance"},
		{"store: nil cause", func(m *Manager) int { return m.Runtime().CancelAll(nil) }, ErrCanceled, ErrCanceled.Error(), ""},
		{"store: instance lost", func(m *Manager) int { return m.Runtime().CancelAll(ErrInstanceLost) }, ErrInstanceLost, ErrInstanceLost.Error(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 4, QueueWhenFull: true}))
			a, b := m.Owner("thread-1"), m.Owner("thread-2")
			root, rp := spawnProbe(t, t.Context(), a)
			detached, dp := spawnProbe(t, rp.ctx, a, WithDetached())
			other, op := spawnProbe(t, t.Context(), b)
			agent, ap := spawnProbe(t, t.Context(), b)
			ran := make(chan struct{}, 1)
			queued, err := a.Spawn(t.Context(), func(context.Context, *Task) (any, error) { ran <- struct{}{}; return nil, nil })
			if err != nil {
				t.Fatal(err)
			}
			if got := getTask(t, a, queued).Status; got != bgtype.StatusQueued {
				t.Fatalf("fifth task %s", got)
			}
			queued2, err := a.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil })
			if err != nil {
				t.Fatal(err)
			}

			if n := tc.cancel(m); n != 6 {
				t.Fatalf("CancelAll = %d, want 6", n)
			}
			for id, p := range map[string]*probeTask{root: rp, detached: dp, other: op, agent: ap} {
				if cause := <-p.cause; !errors.Is(cause, tc.want) {
					t.Errorf("%s: cause %v, want %v", id, cause, tc.want)
				}
			}
			for _, w := range []struct {
				o  Owner
				id string
			}{{a, root}, {a, detached}, {b, other}, {b, agent}, {a, queued}, {a, queued2}} {
				if got := waitTask(t, w.o, w.id); got.Status != bgtype.StatusCanceled || got.Error != tc.wantErr || got.CancelReason != tc.wantReason {
					t.Errorf("%s: %s %q (reason %q), want cancelled %q (%q)", w.id, got.Status, got.Error, got.CancelReason, tc.wantErr, tc.wantReason)
				}
			}
			select {
			case <-ran:
				t.Fatal("a queued task ran after CancelAll")
			default:
			}
			if n := tc.cancel(m); n != 0 {
				t.Fatalf("second CancelAll = %d", n)
			}
			// Still open.
			id, p := spawnProbe(t, t.Context(), a)
			close(p.release)
			if got := waitTask(t, a, id); got.Status != bgtype.StatusCompleted {
				t.Fatalf("spawn after CancelAll: %s", got.Status)
			}
		})
	}
}

func TestCancelAllEmptyAndClosed(t *testing.T) {
	m := newTestManager(t)
	if n, err := m.CancelAll(); n != 0 || err != nil {
		t.Fatalf("CancelAll on an empty Manager = %d, %v", n, err)
	}
	shutdownManager(t, m)
	if n, err := m.CancelAll(); n != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("CancelAll after Shutdown = %d, %v; want 0, ErrClosed", n, err)
	}
	if n := m.Runtime().CancelAll(nil); n != 0 {
		t.Fatalf("the store's CancelAll after Shutdown = %d", n)
	}
}

// TestOwnerCancelAllReason: the Owner's CancelAll takes WithReason as the
// Manager's does; another owner's tasks are untouched.
func TestOwnerCancelAllReason(t *testing.T) {
	m := newTestManager(t)
	a, b := m.Owner("thread-1"), m.Owner("thread-2")
	mine, _ := spawnProbe(t, t.Context(), a)
	theirs, tp := spawnProbe(t, t.Context(), b)
	if n, err := a.CancelAll(WithReason("the user left")); n != 1 || err != nil {
		t.Fatalf("CancelAll = %d, %v; want 1, nil", n, err)
	}
	if got := waitTask(t, a, mine); got.Status != bgtype.StatusCanceled || got.CancelReason != "the user left" || got.Error != ErrCanceled.Error()+": the user left" {
		t.Fatalf("mine: %s %q (reason %q)", got.Status, got.Error, got.CancelReason)
	}
	close(tp.release)
	if got := waitTask(t, b, theirs); got.Status != bgtype.StatusCompleted {
		t.Fatalf("theirs: %s, want completed", got.Status)
	}
}
