package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// One open run per thread across the fleet: a run of alice open on A
// makes RunStart on B fail with ErrRunOpen and change nothing; once A's
// run ends, or A stops, or A dies and is reaped, B's run opens. A run
// another thread holds is not concerned (issue 29 §2). HeldRun names the
// open run and its instance from either instance.
func TestOneRunPerThreadAcrossInstances(t *testing.T) {
	t.Parallel()
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

// A stop that lands on B while the thread's run is open on A reaches A:
// the run's task there is cancelled with the reason, A's Receiver hears
// it (OnRunCanceled, which ends the turn), and a later spawn into the run
// on A is refused. A stop naming a run that is not the open one reaches
// nobody.
func TestStopRunReachesTheInstanceThatHoldsIt(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	sb, mb, _ := instanceStore(t, dsn, "inst_b")
	type heard struct{ run, reason string }
	got := make(chan heard, 2)
	a, err := ma.NewReceiver("alice", bgtask.ReceiverConfig{OnRunCanceled: func(run, reason string) { got <- heard{run, reason} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RunStart(t.Context(), bgtask.RunInfo{RunID: "run_a"}); err != nil {
		t.Fatal(err)
	}
	call := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run_a", CallID: "call_1"})
	id, err := ma.Owner("alice").Spawn(call, func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sb.RequestRunCancel(t.Context(), "alice", "run_old", "stale", "inst_b"); err != nil || n != "" {
		t.Fatalf("RequestRunCancel of a run that is not open = %q, %v; want none", n, err)
	}
	stop, err := mb.Owner("alice").StopRun(t.Context(), "deploy freeze")
	if want := (bgtask.StoppedRun{RunID: "run_a", Instance: "inst_a", Canceled: 1}); err != nil || stop != want {
		t.Fatalf("StopRun on B = %+v, %v; want %+v", stop, err, want)
	}
	if h := <-got; h != (heard{"run_a", "deploy freeze"}) {
		t.Fatalf("A's OnRunCanceled heard %+v", h)
	}
	meta, err := ma.Wait(t.Context(), id)
	if err != nil || meta.Status != bgtype.StatusCanceled || meta.CancelReason != "deploy freeze" {
		t.Fatalf("the run's task on A: %+v, %v; want cancelled with the reason", meta, err)
	}
	if _, err := ma.Owner("alice").Spawn(call, func(context.Context, *bgtask.Task) (any, error) { return nil, nil }); !errors.Is(err, bgtask.ErrCanceled) {
		t.Fatalf("a spawn into the stopped run on A: %v; want ErrCanceled", err)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_runs SET owner = owner WHERE cancel_reason IS NOT NULL`); n != 0 {
		t.Fatalf("%d stops left on the runs once A took them", n)
	}
	if err := a.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run_a", Canceled: true, Reason: "deploy freeze"}); err != nil {
		t.Fatal(err)
	}
	if stop, err := mb.Owner("alice").StopRun(t.Context(), ""); err != nil || stop != (bgtask.StoppedRun{}) {
		t.Fatalf("StopRun once the run ended = %+v, %v; want none", stop, err)
	}
}

// An end that A's turn handed to the model in a turn that was aborted is
// in the thread's conversation: the thread's next turn, on B, does not
// hand it out again, and marks it heard at its second step; A's next turn
// hands nothing either. Exactly once across the fleet. If A's process is
// gone by then (stopped, or a new process registered A's id: a restart),
// the conversation may have gone with it, and B hands the end again, as
// after a crash.
func TestAbortedTurnsEndsCarriedToAnotherInstance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		between   func(t *testing.T, dsn string, stopA func())
		wantAgain bool
	}{
		{"A lives", func(*testing.T, string, func()) {}, false},
		{"A stopped", func(_ *testing.T, _ string, stopA func()) { stopA() }, true},
		{"A restarted", func(t *testing.T, dsn string, stopA func()) {
			stopA()
			instanceStore(t, dsn, "inst_a") // a new process with A's id
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDSN(t)
			sa, ma, stopA := instanceStore(t, dsn, "inst_a")
			_, mb, _ := instanceStore(t, dsn, "inst_b")
			a, err := ma.NewReceiver("alice", bgtask.ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := mb.NewReceiver("alice", bgtask.ReceiverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if err := a.RunStart(ctx, bgtask.RunInfo{RunID: "turn_1"}); err != nil {
				t.Fatal(err)
			}
			id, err := ma.Owner("alice").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "done", nil })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ma.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
			if evs, err := a.Deliver(ctx); err != nil || len(evs) != 1 || evs[0].TaskID != id {
				t.Fatalf("turn 1 on A handed %+v, %v", evs, err)
			}
			if err := a.RunEnd(ctx, bgtask.RunOutcome{RunID: "turn_1", Aborted: true}); err != nil {
				t.Fatal(err)
			}
			wantHeld(t, sa, "alice", "", "") // closed, carrying the end
			if n := sqlExec(t, dsn, `UPDATE bgtask_runs SET owner = owner WHERE owner = 'alice' AND NOT open AND carried = ARRAY[$1]`, id); n != 1 {
				t.Fatalf("%d closed runs of alice carry the end, want 1", n)
			}
			tt.between(t, dsn, stopA)

			if err := b.RunStart(ctx, bgtask.RunInfo{RunID: "turn_2"}); err != nil {
				t.Fatal(err)
			}
			evs, err := b.Deliver(ctx)
			if again := len(evs) == 1 && evs[0].TaskID == id; err != nil || again != tt.wantAgain || len(evs) > 1 {
				t.Fatalf("turn 2 on B, step 1, handed %+v, %v; want the end again: %v", evs, err, tt.wantAgain)
			}
			if evs, err := b.Deliver(ctx); err != nil || len(evs) != 0 {
				t.Fatalf("turn 2 on B, step 2, handed %+v, %v; want nothing", evs, err)
			}
			if meta, err := mb.Get(ctx, id); err != nil || !meta.Announced {
				t.Fatalf("after turn 2's second step: %+v, %v; want announced", meta, err)
			}
			if err := b.RunEnd(ctx, bgtask.RunOutcome{RunID: "turn_2"}); err != nil {
				t.Fatal(err)
			}
			if tt.wantAgain {
				return
			}
			if err := a.RunStart(ctx, bgtask.RunInfo{RunID: "turn_3"}); err != nil {
				t.Fatal(err)
			}
			for step := 1; step <= 2; step++ {
				if evs, err := a.Deliver(ctx); err != nil || len(evs) != 0 {
					t.Fatalf("turn 3 on A, step %d, handed %+v, %v; want nothing", step, evs, err)
				}
			}
			if err := a.RunEnd(ctx, bgtask.RunOutcome{RunID: "turn_3"}); err != nil {
				t.Fatal(err)
			}
			if n := sqlExec(t, dsn, `UPDATE bgtask_runs SET owner = owner WHERE owner = 'alice'`); n != 0 {
				t.Fatalf("%d runs of alice left after the turns", n)
			}
		})
	}
}
