package pgstore_test

import (
	"errors"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// One open run per thread across the fleet: a run of alice open on A
// makes RunStart on B fail with ErrRunOpen and change nothing; once A's
// run ends, or A stops, or A dies and is reaped, B's run opens. A run
// another thread holds is not concerned (issue 29 §2). HeldRun names the
// open run and its instance from either instance.
func TestOneRunPerThreadAcrossInstances(t *testing.T) {
	tests := []struct {
		name    string
		release func(t *testing.T, dsn string, a *bgtask.Receiver, stopA func(), sb *pgstore.Store)
	}{
		{"A's run ends", func(t *testing.T, _ string, a *bgtask.Receiver, _ func(), _ *pgstore.Store) {
			if err := a.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run_a"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"A's receiver is closed", func(t *testing.T, _ string, a *bgtask.Receiver, _ func(), _ *pgstore.Store) {
			if err := a.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"A stops", func(t *testing.T, _ string, _ *bgtask.Receiver, stopA func(), _ *pgstore.Store) { stopA() }},
		{"A dies and is reaped", func(t *testing.T, dsn string, _ *bgtask.Receiver, _ func(), sb *pgstore.Store) {
			killInstance(t, dsn, "inst_a")
			if _, err := sb.Reap(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := sqlExec(t, dsn, `UPDATE bgtask_runs SET owner = owner WHERE instance = 'inst_a'`); n != 0 {
				t.Fatalf("the reaper left %d of the dead instance's runs", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDSN(t)
			_, ma, stopA := instanceStore(t, dsn, "inst_a")
			sb, mb, _ := instanceStore(t, dsn, "inst_b")
			a, err := ma.NewReceiver("alice", bgtask.ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := mb.NewReceiver("alice", bgtask.ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_a"}); err != nil {
				t.Fatal(err)
			}
			err = b.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_b"})
			if !errors.Is(err, bgtask.ErrRunOpen) || err.Error() != "bgtask: a run is already open: on another instance" {
				t.Fatalf("RunStart on B while A's run is open = %v, want ErrRunOpen", err)
			}
			if b.Running() {
				t.Fatal("B's receiver runs after a refused RunStart")
			}
			wantHeld(t, sb, "alice", "run_a", "inst_a")
			if _, err := b.Deliver(t.Context()); !errors.Is(err, bgtask.ErrNoRun) {
				t.Fatalf("Deliver on B after the refusal = %v, want ErrNoRun", err)
			}
			// Another thread is not concerned.
			bob, err := mb.NewReceiver("bob", bgtask.ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := bob.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_bob"}); err != nil {
				t.Fatalf("bob's RunStart on B: %v", err)
			}
			wantHeld(t, sb, "bob", "run_bob", "inst_b")
			tt.release(t, dsn, a, stopA, sb)
			wantHeld(t, sb, "alice", "", "")
			if err := b.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_b"}); err != nil {
				t.Fatalf("RunStart on B once A's run is gone: %v", err)
			}
			wantHeld(t, sb, "alice", "run_b", "inst_b")
			if err := b.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run_b"}); err != nil {
				t.Fatal(err)
			}
			if n := sqlExec(t, dsn, `UPDATE bgtask_runs SET owner = owner WHERE owner = 'alice'`); n != 0 {
				t.Fatalf("%d runs of alice left after B's run ended", n)
			}
		})
	}
}

// wantHeld checks HeldRun of owner on s.
func wantHeld(t *testing.T, s *pgstore.Store, owner, run, instance string) {
	t.Helper()
	gotRun, gotInstance, err := s.HeldRun(t.Context(), owner)
	if err != nil || gotRun != run || gotInstance != instance {
		t.Fatalf("HeldRun(%s) = %q, %q, %v; want %q, %q", owner, gotRun, gotInstance, err, run, instance)
	}
}
