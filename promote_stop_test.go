package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// A stop of its run while a foreground call waits: the call returns the
// task's cancel (or, if the turn heard of the stop first, the turn's
// cause), and the owner hears the task's end once, with the stop's
// reason, whichever came first (decision 803). Before, the call that
// heard the cancel first took the end for itself: no event, so a stopped
// turn's model never learned its call was cancelled, nor why.
func TestForegroundRunStopAnnouncesEnd(t *testing.T) {
	t.Parallel()
	errStop := errors.New("user stop")
	for _, tc := range []struct {
		name      string
		stopTurn  bool // the turn's ctx ends right after the stop, as a host's OnRunCanceled does
		wantError error
	}{
		{"the call hears the cancel", false, ErrCanceled},
		{"the turn is stopped too", true, nil}, // either error: the call may hear either first
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				ctx, stopTurn := context.WithCancelCause(WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"}))
				time.AfterFunc(time.Second, func() {
					if _, err := o.CancelRun("run-1", WithReason("the user stopped it")); err != nil {
						t.Error(err)
					}
					if tc.stopTurn {
						stopTurn(errStop)
					}
				})
				res, err := o.Foreground(ctx, time.Hour, func(ctx context.Context, _ *Task) (any, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				})
				switch {
				case tc.wantError != nil && !errors.Is(err, tc.wantError):
					t.Fatalf("Foreground = %+v, %v; want %v", res, err, tc.wantError)
				case tc.wantError == nil && !errors.Is(err, ErrCanceled) && !errors.Is(err, errStop):
					t.Fatalf("Foreground = %+v, %v; want the cancel or the turn's stop", res, err)
				}
				meta := waitTask(t, o, res.TaskID)
				synctest.Wait()
				if meta.Status != bgtype.StatusCanceled || meta.CancelReason != "the user stopped it" {
					t.Errorf("record %s, reason %q; want cancelled with the stop's reason", meta.Status, meta.CancelReason)
				}
				evs := ib.Drain()
				if len(evs) != 1 || evs[0].Kind != bgtype.EventCanceled || evs[0].TaskID != res.TaskID || evs[0].CancelReason != "the user stopped it" {
					t.Errorf("events = %+v; want the task's cancel once, with the stop's reason", evs)
				}
			})
		})
	}
}
