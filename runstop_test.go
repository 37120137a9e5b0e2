package bgtask

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// StopRun stops the owner's open run: its tasks are cancelled with the
// reason, later spawns into it fail, and the Receiver hears it
// (OnRunCanceled) so the host ends the turn. With no open run it stops
// nothing; after RunEnd the Receiver is not told again.
func TestStopRunStopsTheOpenRun(t *testing.T) {
	m := newTestManager(t, WithInstance("inst_a"))
	type heard struct{ run, reason string }
	got := make(chan heard, 4)
	r, err := m.NewReceiver("alice", ReceiverConfig{OnRunCanceled: func(run, reason string) { got <- heard{run, reason} }})
	if err != nil {
		t.Fatal(err)
	}
	o := m.Owner("alice")
	if stop, err := o.StopRun(t.Context(), "nothing runs"); err != nil || stop != (StoppedRun{}) {
		t.Fatalf("StopRun with no open run = %+v, %v; want zero", stop, err)
	}
	if err := r.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	call := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"})
	id, err := o.Spawn(call, func(ctx context.Context, _ *Task) (any, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := o.StopRun(t.Context(), "the user left")
	if want := (StoppedRun{RunID: "run-1", Instance: "inst_a", Canceled: 1}); err != nil || stop != want {
		t.Fatalf("StopRun = %+v, %v; want %+v", stop, err, want)
	}
	if h := <-got; h != (heard{"run-1", "the user left"}) {
		t.Fatalf("OnRunCanceled heard %+v", h)
	}
	meta, err := m.Wait(t.Context(), id)
	if err != nil || meta.Status != bgtype.StatusCanceled || meta.CancelReason != "the user left" {
		t.Fatalf("the run's task: %+v, %v; want cancelled with the reason", meta, err)
	}
	if _, err := o.Spawn(call, func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrCanceled) {
		t.Fatalf("a spawn into the stopped run: %v; want ErrCanceled", err)
	}
	if err := r.RunEnd(t.Context(), RunOutcome{RunID: "run-1", Canceled: true, Reason: "the user left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.CancelRun("run-1"); err != nil {
		t.Fatal(err)
	}
	if stop, err := o.StopRun(t.Context(), ""); err != nil || stop != (StoppedRun{}) {
		t.Fatalf("StopRun after RunEnd = %+v, %v; want zero", stop, err)
	}
	select {
	case h := <-got:
		t.Fatalf("OnRunCanceled called for an ended run: %+v", h)
	default:
	}
	if _, err := m.Owner(" ").StopRun(t.Context(), ""); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Fatalf("StopRun of a blank owner: %v", err)
	}
}

// RunStoppedError matches ErrRunStopped and carries the reason.
func TestRunStoppedError(t *testing.T) {
	tests := []struct {
		reason, text string
	}{
		{"", "bgtask: run stopped by the user"},
		{"deploy freeze", "bgtask: run stopped by the user: deploy freeze"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(&RunStoppedError{Reason: tt.reason})
		if !RunStopped(ctx) || context.Cause(ctx).Error() != tt.text {
			t.Errorf("reason %q: RunStopped %v, text %q; want true, %q", tt.reason, RunStopped(ctx), context.Cause(ctx), tt.text)
		}
	}
}

// TestRunCanceled: a run is reported cancelled once CancelRun or StopRun
// marked it, before its tasks' functions return; another run, another
// owner's run of the same id and an open run are not.
func TestRunCanceled(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("alice")
	r, err := m.NewReceiver("alice", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	seen := make(chan bool, 1)
	call := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"})
	if _, err := o.Spawn(call, func(ctx context.Context, _ *Task) (any, error) {
		<-ctx.Done()
		seen <- o.RunCanceled("run-1") // what a host asks once its task is cancelled
		return nil, context.Cause(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if o.RunCanceled("run-1") {
		t.Fatal("RunCanceled of the open run = true")
	}
	if _, err := o.StopRun(t.Context(), "the user left"); err != nil {
		t.Fatal(err)
	}
	if !<-seen {
		t.Fatal("the cancelled task's function saw RunCanceled false")
	}
	for _, tc := range []struct {
		owner, run string
		want       bool
	}{{"alice", "run-1", true}, {"alice", "run-2", false}, {"bob", "run-1", false}} {
		if got := m.Owner(tc.owner).RunCanceled(tc.run); got != tc.want {
			t.Errorf("%s's RunCanceled(%s) = %v, want %v", tc.owner, tc.run, got, tc.want)
		}
	}
}
