package bgtask

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/internal/jsoncap"
)

// causeTask records its context's cause and returns the context's error.
func causeTask(causes chan<- error) Func {
	return func(ctx context.Context, _ *Task) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
}

// A cancel without a reason keeps its plain cause; a long reason is cut;
// descendants of a tree get the reason with ErrCanceled (parent).
func TestCancelReasonEdges(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("alice")
	causes := make(chan error, 1)
	id, err := o.Spawn(t.Context(), causeTask(causes))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; cause != ErrCanceled {
		t.Errorf("cause without a reason = %v, want ErrCanceled itself", cause)
	}
	if meta := waitTask(t, o, id); meta.CancelReason != "" {
		t.Errorf("CancelReason = %q, want none", meta.CancelReason)
	}

	long := strings.Repeat("r", MaxCancelReasonBytes+10)
	id, err = o.Spawn(t.Context(), causeTask(causes))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Cancel(t.Context(), id, WithReason(long)); err != nil {
		t.Fatal(err)
	}
	<-causes
	want, _ := jsoncap.Text(long, MaxCancelReasonBytes)
	if meta := waitTask(t, o, id); meta.CancelReason != want || len(want) > MaxCancelReasonBytes || !strings.HasSuffix(want, "[truncated: 1034 bytes total]") {
		t.Errorf("CancelReason = %q (%d bytes), want it cut", meta.CancelReason, len(meta.CancelReason))
	}

	kidCauses := make(chan error, 1)
	spawned := make(chan error, 1)
	parent, err := o.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
		_, err := o.Spawn(ctx, causeTask(kidCauses))
		spawned <- err
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-spawned; err != nil {
		t.Fatal(err)
	}
	if n, err := o.CancelTree(t.Context(), parent, WithReason("stop")); n != 2 || err != nil {
		t.Fatalf("CancelTree = %d, %v", n, err)
	}
	if cause := <-kidCauses; !errors.Is(cause, errParentCanceled) || !errors.Is(cause, ErrCanceled) || cause.Error() != "bgtask: parent task cancelled: stop" {
		t.Errorf("descendant's cause = %v", cause)
	}
}
