package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// The Plugin's RunEnd passes the host's reason for a user's stop on: the
// model reads it in the cancelled event of each task the stop cancelled,
// or bgtask.StopReason when the host gives none.
func TestPluginRunEndReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ reason, want string }{
		{"", bgtask.StopReason},
		{"the user chose another plan", "the user chose another plan"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			pr := newPluginRun(t)
			ctx := bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1", CallID: "call-1"})
			id, err := pr.o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() })
			if err != nil {
				t.Fatal(err)
			}
			if err := pr.p.RunEnd(t.Context(), bgtask.RunOutcome{RunID: "run-1", Canceled: true, Reason: tc.reason}); err != nil {
				t.Fatal(err)
			}
			if meta, err := pr.m.Wait(t.Context(), id); meta.Status != bgtype.StatusCanceled || meta.CancelReason != tc.want {
				t.Fatalf("record: %s, reason %q, %v; want cancelled, %q", meta.Status, meta.CancelReason, err, tc.want)
			}
			if err := pr.p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-2"}); err != nil {
				t.Fatal(err)
			}
			msgs, err := pr.p.Deliver(t.Context())
			if err != nil || len(msgs) != 1 || msgs[0].Event == nil || msgs[0].Event.Kind != bgtype.EventCanceled {
				t.Fatalf("Deliver = %q, %v; want the cancelled event", messageKinds(msgs), err)
			}
			if want := `"reason":"` + tc.want + `"`; !strings.Contains(msgs[0].Content, want) || msgs[0].Event.CancelReason != tc.want {
				t.Fatalf("the model reads %s (reason %q); want %s in it", msgs[0].Content, msgs[0].Event.CancelReason, want)
			}
		})
	}
}
