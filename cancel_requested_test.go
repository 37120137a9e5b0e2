package bgtask

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// CancelRequested, what a shared store calls for another process's cancel
// request: a running task ends cancelled with the request's reason (with
// its attached child when tree), and an unknown task is not an error.
func TestCancelRequested(t *testing.T) {
	tests := []struct {
		name       string
		tree       bool
		reason     string
		wantN      int
		wantChild  bgtype.Status
		wantReason string
	}{
		{"task", false, "", 1, bgtype.StatusCompleted, ""},
		{"tree with reason", true, "the user stopped it", 2, bgtype.StatusCanceled, "the user stopped it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("alice")
			childID := make(chan string, 1)
			release := make(chan struct{})
			id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				cid, err := o.Spawn(ctx, func(ctx context.Context, _ *Task) (any, error) {
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-release:
						return "child", ctx.Err() // a cancelled child reads cancelled whichever case ran

					}
				})
				if err != nil {
					return nil, err
				}
				childID <- cid
				<-ctx.Done()
				return nil, ctx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			cid := <-childID
			n, err := m.Runtime().CancelRequested(t.Context(), id, tc.tree, tc.reason)
			if err != nil || n != tc.wantN {
				t.Fatalf("CancelRequested = %d, %v; want %d, nil", n, err, tc.wantN)
			}
			close(release)
			meta, _ := o.Wait(t.Context(), id)
			if meta.Status != bgtype.StatusCanceled || meta.CancelReason != tc.wantReason {
				t.Fatalf("task %s (reason %q), want cancelled (%q)", meta.Status, meta.CancelReason, tc.wantReason)
			}
			child, _ := o.Wait(t.Context(), cid)
			if child.Status != tc.wantChild {
				t.Fatalf("child %s, want %s", child.Status, tc.wantChild)
			}
			if n, err := m.Runtime().CancelRequested(t.Context(), "task_unknown", tc.tree, ""); n != 0 || err != nil {
				t.Fatalf("unknown task: %d, %v; want 0, nil", n, err)
			}
		})
	}
}
