package bgtask

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// TestRequestInputAnswered: the record is awaiting_input with the request,
// an on_activity owner gets the event, a wrong answer is refused, the right
// one resumes the task.
func TestRequestInputAnswered(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	got := make(chan bgtype.Message, 1)
	release := make(chan struct{})
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		msg, err := tk.RequestInput(ctx, "Which region?")
		if err != nil {
			return nil, err
		}
		got <- msg
		<-release
		return msg.Content, nil
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := m.waitSettled(t.Context(), ownerReach("thread-1"), id)
	if err != nil {
		t.Fatal(err)
	}
	req := meta.Input
	if meta.Status != bgtype.StatusAwaitingInput || req == nil || !strings.HasPrefix(req.ID, "input_") || len(req.ID) != len("input_")+32 || req.Prompt != "Which region?" {
		t.Fatalf("record %s, request %+v", meta.Status, req)
	}
	evs := drainOwner(t, o)
	if len(evs) != 1 || evs[0].Kind != bgtype.EventInputRequested || evs[0].TaskID != id || *evs[0].Input != *req {
		t.Fatalf("events %+v", evs)
	}
	for _, bad := range []string{"input_other", strings.ToUpper(req.ID)} {
		_, err := o.Send(t.Context(), id, bgtype.Message{Content: "eu", InReplyTo: bad})
		if !errors.Is(err, ErrNoInputRequest) {
			t.Fatalf("answer to %s: %v", bad, err)
		}
	}
	if got := getTask(t, o, id); got.Status != bgtype.StatusAwaitingInput || got.Input.ID != req.ID {
		t.Fatalf("after a wrong answer: %s %+v", got.Status, got.Input)
	}
	answer := bgtype.Message{From: "user", Content: "eu-west", InReplyTo: req.ID}
	if _, err := o.Send(t.Context(), id, answer); err != nil {
		t.Fatal(err)
	}
	if msg := <-got; msg != answer {
		t.Fatalf("task got %+v", msg)
	}
	if got := getTask(t, o, id); got.Status != bgtype.StatusRunning || got.Input != nil {
		t.Fatalf("after the answer: %s %+v", got.Status, got.Input)
	}
	if _, err := o.Send(t.Context(), id, answer); !errors.Is(err, ErrNoInputRequest) {
		t.Fatalf("second answer: %v", err)
	}
	close(release)
	if got := waitTask(t, o, id); got.Status != bgtype.StatusCompleted || string(got.Result) != `"eu-west"` {
		t.Fatalf("end %s %s", got.Status, got.Result)
	}
}

// TestRequestInputCtxEnds: when ctx ends first the record is running again
// and RequestInput returns ctx's cause; a late answer is refused.
func TestRequestInputCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		cause := errors.New("nobody answered")
		res := make(chan error, 1)
		release := make(chan struct{})
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			rctx, cancel := context.WithTimeoutCause(ctx, time.Minute, cause)
			defer cancel()
			_, err := tk.RequestInput(rctx, "still there?")
			res <- err
			<-release
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		meta, err := m.waitSettled(t.Context(), ownerReach("thread-1"), id)
		if err != nil || meta.Status != bgtype.StatusAwaitingInput {
			t.Fatalf("%+v, %v", meta, err)
		}
		start := time.Now()
		if err := <-res; err != cause || time.Since(start) != time.Minute {
			t.Fatalf("RequestInput = %v after %v", err, time.Since(start))
		}
		if got := getTask(t, o, id); got.Status != bgtype.StatusRunning || got.Input != nil {
			t.Fatalf("after ctx ended: %s %+v", got.Status, got.Input)
		}
		if _, err := o.Send(t.Context(), id, bgtype.Message{InReplyTo: meta.Input.ID}); !errors.Is(err, ErrNoInputRequest) {
			t.Fatalf("late answer: %v", err)
		}
		close(release)
		waitTask(t, o, id)
	})
}

// TestRequestInputTaskCanceled: cancelling the task ends the request with
// the cancel cause, and the task ends cancelled.
func TestRequestInputTaskCanceled(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		return tk.RequestInput(ctx, "waiting")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.waitSettled(t.Context(), ownerReach("thread-1"), id); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled || got.Input != nil {
		t.Fatalf("end %s %+v", got.Status, got.Input)
	}
}

func TestRequestInputErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		type result struct {
			msg bgtype.Message
			err error
		}
		first := make(chan result, 1)
		second := make(chan error, 1)
		proceed := make(chan struct{})
		var handle *Task
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			handle = tk
			if _, err := tk.RequestInput(ctx, " \t"); !errors.Is(err, ErrInvalidArgument) {
				return nil, err
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				msg, err := tk.RequestInput(ctx, "first")
				first <- result{msg, err}
			}()
			<-proceed
			_, err := tk.RequestInput(ctx, "second")
			second <- err
			<-done
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first request is open, the function waits for proceed
		meta := getTask(t, o, id)
		if meta.Status != bgtype.StatusAwaitingInput || meta.Input.Prompt != "first" {
			t.Fatalf("record %s %+v", meta.Status, meta.Input)
		}
		close(proceed)
		if err := <-second; !errors.Is(err, ErrInputPending) {
			t.Fatalf("second request: %v", err)
		}
		if _, err := o.Send(t.Context(), id, bgtype.Message{Content: "ok", InReplyTo: meta.Input.ID}); err != nil {
			t.Fatal(err)
		}
		if r := <-first; r.err != nil || r.msg.Content != "ok" {
			t.Fatalf("first request: %+v", r)
		}
		waitTask(t, o, id)
		if _, err := handle.RequestInput(t.Context(), "too late"); !errors.Is(err, errTaskEnded) {
			t.Fatalf("after the end: %v", err)
		}
	})
}
