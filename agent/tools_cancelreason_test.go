package agent

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// Every way to cancel takes a reason: it is on the record, in the cause
// (matching ErrCanceled, with the cancel's own text), in the cancelled
// event and its JSON, and in get_task.
func TestCancelWithReason(t *testing.T) {
	const reason = "the user changed plans <b>"
	for _, tc := range []struct {
		name   string
		cancel func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string)
		prefix string // the cause's text before the reason
	}{
		{"Manager.Cancel", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := m.Cancel(t.Context(), id, bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("Cancel = %d, %v", n, err)
			}
		}, "bgtask: task cancelled"},
		{"Owner.Cancel", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := o.Cancel(t.Context(), id, bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("Cancel = %d, %v", n, err)
			}
		}, "bgtask: task cancelled"},
		{"Owner.CancelTree", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := o.CancelTree(t.Context(), id, bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("CancelTree = %d, %v", n, err)
			}
		}, "bgtask: task cancelled"},
		{"Manager.CancelTree", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := m.CancelTree(t.Context(), id, bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("CancelTree = %d, %v", n, err)
			}
		}, "bgtask: task cancelled"},
		{"Owner.CancelRun", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := o.CancelRun("run-1", bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("CancelRun = %d, %v", n, err)
			}
		}, "bgtask: run cancelled"},
		{"Manager.CancelRun", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			if n, err := m.CancelRun(o.ID(), "run-1", bgtask.WithReason(reason)); n != 1 || err != nil {
				t.Fatalf("CancelRun = %d, %v", n, err)
			}
		}, "bgtask: run cancelled"},
		{"cancel_task child", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			var r cancelReceipt
			callTool(t, runCtx(t.Context(), "run-1"), toolNamed(t, o, "cancel_task"),
				`{"target":{"relation":"child","name":"`+id+`"},"reason":" `+reason+` "}`, &r)
			if r.CanceledCount != 1 {
				t.Fatalf("cancel_task = %+v", r)
			}
		}, "bgtask: task cancelled"},
		{"cancel_task self in a run", func(t *testing.T, m *bgtask.Manager, o bgtask.Owner, id string) {
			var r cancelReceipt
			callTool(t, runCtx(t.Context(), "run-1"), toolNamed(t, o, "cancel_task"),
				`{"target":{"relation":"self","name":null},"reason":"`+reason+`"}`, &r)
			if r.CanceledCount != 1 {
				t.Fatalf("cancel_task = %+v", r)
			}
		}, "bgtask: run cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("alice")
			inbox, err := o.Inbox()
			if err != nil {
				t.Fatal(err)
			}
			causes := make(chan error, 1)
			id, err := o.Spawn(runCtx(t.Context(), "run-1"), causeTask(causes))
			if err != nil {
				t.Fatal(err)
			}
			tc.cancel(t, m, o, id)
			cause := <-causes
			wantText := tc.prefix + ": " + reason
			if !errors.Is(cause, bgtask.ErrCanceled) || cause.Error() != wantText {
				t.Errorf("cause = %v, want %q matching ErrCanceled", cause, wantText)
			}
			meta, err := o.Wait(t.Context(), id)
			if err != nil || meta.Status != bgtype.StatusCanceled || meta.CancelReason != reason || meta.Error != wantText || meta.ErrorKind != "" {
				t.Fatalf("Wait = %s/%q/%q/%q, %v", meta.Status, meta.CancelReason, meta.Error, meta.ErrorKind, err)
			}
			evs := inbox.Drain()
			if len(evs) != 1 || evs[0].Kind != bgtype.EventCanceled || evs[0].CancelReason != reason {
				t.Fatalf("events = %+v", evs)
			}
			b, err := json.Marshal(evs[0])
			if err != nil || string(b) != `{"kind":"cancelled","task_id":"`+id+`","reason":"the user changed plans \u003cb\u003e"}` {
				t.Errorf("event JSON = %s, %v", b, err)
			}
			var back bgtype.Event
			if err := json.Unmarshal(b, &back); err != nil || back.CancelReason != reason {
				t.Errorf("event read back = %+v, %v", back, err)
			}
			var got getResult
			callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &got)
			if got.Task.CancelReason != reason {
				t.Errorf("get_task cancel_reason = %q", got.Task.CancelReason)
			}
		})
	}
}
