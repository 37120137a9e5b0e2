package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// A task whose time runs out sees a cause matching ErrTimeout and ends
// failed with the kind "timeout", after exactly its timeout of fake time;
// Wait returns a *TaskError that matches ErrTimeout; the event, its JSON,
// get_task and list_tasks carry the kind.
func TestWithTimeoutEndsFailedWithKindTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		inbox, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		causes := make(chan error, 1)
		id, err := o.Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}, bgtask.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := o.Wait(t.Context(), id)
		if cause := <-causes; !errors.Is(cause, bgtask.ErrTimeout) || cause.Error() != "bgtask: task timed out after 5s" {
			t.Errorf("the task's cause = %v, want ErrTimeout", cause)
		}
		te, ok := errors.AsType[*bgtask.TaskError](err)
		if !ok || !errors.Is(err, bgtask.ErrTimeout) || *te != (bgtask.TaskError{TaskID: id, Kind: bgtype.KindTimeout, Message: "bgtask: task timed out after 5s"}) {
			t.Fatalf("Wait error = %#v, want a timeout *TaskError", err)
		}
		if err.Error() != "bgtask: task "+id+" failed (timeout): bgtask: task timed out after 5s" {
			t.Errorf("Wait error text = %q", err)
		}
		if meta.Status != bgtype.StatusFailed || meta.ErrorKind != bgtype.KindTimeout || meta.FinishedAt.Sub(meta.CreatedAt) != 5*time.Second {
			t.Errorf("record = %s/%s after %v, want failed/timeout after 5s", meta.Status, meta.ErrorKind, meta.FinishedAt.Sub(meta.CreatedAt))
		}
		evs := inbox.Drain()
		if len(evs) != 1 || evs[0].Kind != bgtype.EventFailed || evs[0].ErrorKind != bgtype.KindTimeout {
			t.Fatalf("events = %+v, want one failed event of kind timeout", evs)
		}
		b, err := json.Marshal(evs[0])
		if err != nil || string(b) != `{"kind":"failed","task_id":"`+id+`","error":"bgtask: task timed out after 5s","error_kind":"timeout"}` {
			t.Errorf("event JSON = %s, %v", b, err)
		}
		var back bgtype.Event
		if err := json.Unmarshal(b, &back); err != nil || back.ErrorKind != bgtype.KindTimeout {
			t.Errorf("event read back = %+v, %v", back, err)
		}
		var got getResult
		callTool(t, t.Context(), toolNamed(t, o, "get_task"), `{"task_id":"`+id+`"}`, &got)
		if got.Task.ErrorKind != bgtype.KindTimeout {
			t.Errorf("get_task error_kind = %q", got.Task.ErrorKind)
		}
		raw := callTool(t, t.Context(), toolNamed(t, o, "list_tasks"), `{}`, nil)
		if !strings.Contains(string(raw), `"error_kind":"timeout"`) {
			t.Errorf("list_tasks = %s, want the kind", raw)
		}
	})
}
