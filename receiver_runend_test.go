package bgtask

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// A run the user stopped cancels its tasks with the host's reason, or
// StopReason by default: the reason is on each record and in the
// cancelled event the owner's next run gets, as with Cancel(WithReason).
// A run that was not stopped cancels nothing, whatever its Reason.
func TestRunEndReason(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("r", MaxCancelReasonBytes+10)
	cut, _ := jsoncap.Text(long, MaxCancelReasonBytes)
	cases := []struct {
		name string
		out  RunOutcome
		want string // the cancel reason; "" for a task that goes on
	}{
		{"default", RunOutcome{Canceled: true}, "stopped by the user"},
		{"given", RunOutcome{Canceled: true, Reason: "the user chose another plan"}, "the user chose another plan"},
		{"long", RunOutcome{Canceled: true, Reason: long}, cut},
		{"not stopped", RunOutcome{Reason: "ignored"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pr := newReceiverRun(t)
			causes := make(chan error, 1)
			ctx := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"})
			id, err := pr.o.Spawn(ctx, causeTask(causes))
			if err != nil {
				t.Fatal(err)
			}
			out := tc.out
			out.RunID = "run-1"
			if err := pr.p.RunEnd(t.Context(), out); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if meta, err := pr.o.Get(t.Context(), id); err != nil || meta.Status != bgtype.StatusRunning {
					t.Fatalf("task after a run that was not stopped: %s, %v; want running", meta.Status, err)
				}
				if _, err := pr.o.Cancel(t.Context(), id); err != nil {
					t.Fatal(err)
				}
				<-causes
				return
			}
			if cause := <-causes; cause.Error() != "bgtask: run cancelled: "+tc.want {
				t.Errorf("cause = %q", cause)
			}
			meta := waitTask(t, pr.o, id)
			if meta.Status != bgtype.StatusCanceled || meta.CancelReason != tc.want {
				t.Errorf("record: %s, reason %q; want cancelled, %q", meta.Status, meta.CancelReason, tc.want)
			}
			if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			evs, err := pr.p.Deliver(t.Context())
			if err != nil || len(evs) != 1 || evs[0].Kind != bgtype.EventCanceled || evs[0].TaskID != id {
				t.Fatalf("Deliver = %v, %v; want the cancelled event", messageKinds(evs), err)
			}
			if evs[0].CancelReason != tc.want {
				t.Errorf("event's reason = %q, want %q", evs[0].CancelReason, tc.want)
			}
			var payload struct {
				Reason string `json:"reason"`
			}
			if b, err := json.Marshal(evs[0]); err != nil || json.Unmarshal(b, &payload) != nil || payload.Reason != tc.want {
				t.Errorf("event JSON %s (%v): reason %q, want %q", b, err, payload.Reason, tc.want)
			}
		})
	}
}
