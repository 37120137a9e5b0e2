package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

// TestOwnerCurrentTask: the current task is the ctx's task only when it is
// the owner itself or one of its tasks on this Manager.
func TestOwnerCurrentTask(t *testing.T) {
	m := newTestManager(t)
	other := newTestManager(t)
	mine, p := spawnProbe(t, t.Context(), m.Owner("thread-1"))
	_, theirs := spawnProbe(t, t.Context(), m.Owner("thread-2"))
	_, foreign := spawnProbe(t, t.Context(), other.Owner("thread-1"))
	for _, c := range []struct {
		name  string
		owner Owner
		ctx   context.Context
		want  string // the task id, "" for none
	}{
		{"no task", m.Owner("thread-1"), t.Context(), ""},
		{"the owner's task", m.Owner("thread-1"), p.ctx, mine},
		{"the task as its own owner (a sub-agent)", m.Owner(mine), p.ctx, mine},
		{"another owner's task", m.Owner("thread-1"), theirs.ctx, ""},
		{"another Manager's task", m.Owner("thread-1"), foreign.ctx, ""},
		{"blank owner", m.Owner(" "), p.ctx, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, ok := c.owner.CurrentTask(c.ctx)
			got := ""
			if ok {
				got = tk.ID()
			}
			if got != c.want || ok != (c.want != "") || (!ok && tk != nil) {
				t.Fatalf("CurrentTask = %v, %v; want %q", tk, ok, c.want)
			}
		})
	}
	for _, pr := range []*probeTask{p, theirs, foreign} {
		close(pr.release)
	}
}

// TestOwnerCancelCurrent: the errors, in order, and what each scope
// cancels; a second call says it was cancelled before.
func TestOwnerCancelCurrent(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	run := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "c1"})
	_, inRun := spawnProbe(t, run, o)
	_, task := spawnProbe(t, t.Context(), o)
	for _, c := range []struct {
		name        string
		owner       Owner
		ctx         context.Context
		n           int
		before      bool
		err, errMsg string
	}{
		{"blank owner", m.Owner(""), run, 0, false, "", bgtype.ErrInvalidOwner.Error()},
		{"no current task or run", o, t.Context(), 0, false, "", "bgtask: invalid argument: no current task or run in the context"},
		{"blank run", o, WithToolCall(t.Context(), ToolCall{RunID: " "}), 0, false, "", "bgtask: invalid argument: no current task or run in the context"},
		{"the run", o, run, 1, false, "", ""},
		{"the run again", o, run, 0, true, "", ""},
		{"the task", o, task.ctx, 1, false, "", ""},
		{"the task again", o, task.ctx, 0, true, "", ""},
	} {
		n, before, err := c.owner.CancelCurrent(c.ctx, WithReason("plan changed"))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if n != c.n || before != c.before || msg != c.errMsg {
			t.Errorf("%s: CancelCurrent = %d, %v, %v; want %d, %v, %q", c.name, n, before, err, c.n, c.before, c.errMsg)
		}
	}
	for _, p := range []*probeTask{inRun, task} {
		if cause := <-p.cause; !errors.Is(cause, ErrCanceled) {
			t.Errorf("cause %v, want ErrCanceled", cause)
		}
	}
	shutdownManager(t, m)
	if _, _, err := o.CancelCurrent(run); !errors.Is(err, ErrClosed) || !o.Closed() {
		t.Fatalf("after Shutdown: %v, Closed %v; want ErrClosed, true", err, o.Closed())
	}
}

// TestOwnerMarkAnswered: an ended task's record is marked announced and its
// event taken out of the owner's inbox; another owner's record is left alone.
func TestOwnerMarkAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		id := spawnFor(t, m, "thread-1", func(context.Context, *Task) (any, error) { return "ok", nil })
		synctest.Wait()
		meta := getTask(t, m, id)
		m.Owner("thread-2").MarkAnswered(t.Context(), &meta) // not its record
		m.Owner("thread-1").MarkAnswered(t.Context(), nil)   // nothing
		if meta.Announced || getTask(t, m, id).Announced {
			t.Fatal("another owner marked the record")
		}
		m.Owner("thread-1").MarkAnswered(t.Context(), &meta)
		if !meta.Announced || !getTask(t, m, id).Announced {
			t.Fatal("the owner's record is not marked")
		}
		if evs := drainOwner(t, m.Owner("thread-1")); len(evs) != 0 {
			t.Fatalf("inbox still holds %v", eventKinds(evs))
		}
	})
}

// TestOwnerSendReturnsMessageID: the id Send returns is the message's in
// the task's history.
func TestOwnerSendReturnsMessageID(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, _, _ := spawnReceiver(t, o, 1)
	msgID, err := o.Send(t.Context(), id, bgtype.Message{From: "thread-1", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := o.Messages(t.Context(), id)
	if err != nil || len(msgs) != 1 || msgs[0].ID != msgID || msgID == "" || msgs[0].Direction != MessageIn {
		t.Fatalf("Send = %q; history %+v, %v", msgID, msgs, err)
	}
	waitTask(t, o, id)
}
