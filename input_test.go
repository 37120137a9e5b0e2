package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
		var handle *Task
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			handle = tk
			if _, err := tk.RequestInput(ctx, " \t"); !errors.Is(err, ErrInvalidArgument) {
				return nil, err
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := waitTask(t, o, id); got.Status != bgtype.StatusCompleted {
			t.Fatalf("end %s %s", got.Status, got.Error)
		}
		if _, err := handle.RequestInput(t.Context(), "too late"); !errors.Is(err, errTaskEnded) {
			t.Fatalf("after the end: %v", err)
		}
	})
}

// TestRequestInputSeveralOpen: a task's goroutines may each ask. The record
// holds every open request, oldest first; each is answered on its own, in
// any order, once, and leaves the record before Send returns; a withdrawn
// one (its ctx ended) leaves too; the task is awaiting_input until the last
// is gone. Another owner reaches none of them.
func TestRequestInputSeveralOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		prompts := []string{"a?", "b?", "c?"}
		start := make([]chan struct{}, len(prompts))
		got := make([]chan string, len(prompts))
		for i := range prompts {
			start[i], got[i] = make(chan struct{}), make(chan string, 1)
		}
		cctx, cancelC := context.WithCancel(t.Context())
		defer cancelC()
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Go(func() {
					<-start[i]
					ask := ctx
					if i == 2 {
						ask = cctx
					}
					msg, err := tk.RequestInput(ask, p)
					if err != nil {
						got[i] <- "error: " + err.Error()
						return
					}
					got[i] <- msg.Content
				})
			}
			wg.Wait()
			return "done", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range prompts { // opened one after another: their order is known
			close(start[i])
			synctest.Wait()
		}
		meta := getTask(t, o, id)
		open := meta.OpenInputs()
		if meta.Status != bgtype.StatusAwaitingInput || len(open) != 3 || open[0].Prompt != "a?" || open[1].Prompt != "b?" || open[2].Prompt != "c?" ||
			len(meta.MoreInput) != 2 || *meta.Input != open[0] {
			t.Fatalf("record %s, open %+v", meta.Status, open)
		}
		if _, err := m.Owner("thread-2").Send(t.Context(), id, bgtype.Message{Content: "x", InReplyTo: open[1].ID}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another owner's answer: %v", err)
		}

		// openPrompts is the record's open prompts, right after a step.
		openPrompts := func() (bgtype.Status, []string) {
			meta := getTask(t, o, id)
			var ps []string
			for _, in := range meta.OpenInputs() {
				ps = append(ps, in.Prompt)
			}
			return meta.Status, ps
		}
		for _, step := range []struct {
			name       string
			do         func() error
			wantErr    error
			wantStatus bgtype.Status
			wantOpen   []string
		}{
			{"the middle one answered", func() error { return send(t, o, id, "B", open[1].ID) }, nil, bgtype.StatusAwaitingInput, []string{"a?", "c?"}},
			{"it again", func() error { return send(t, o, id, "B2", open[1].ID) }, ErrNoInputRequest, bgtype.StatusAwaitingInput, []string{"a?", "c?"}},
			{"an unknown one", func() error { return send(t, o, id, "?", "input_unknown") }, ErrNoInputRequest, bgtype.StatusAwaitingInput, []string{"a?", "c?"}},
			{"the last one withdrawn", func() error { cancelC(); synctest.Wait(); return nil }, nil, bgtype.StatusAwaitingInput, []string{"a?"}},
			{"the first one answered", func() error { return send(t, o, id, "A", open[0].ID) }, nil, bgtype.StatusRunning, nil},
		} {
			if err := step.do(); !errors.Is(err, step.wantErr) || (err == nil) != (step.wantErr == nil) {
				t.Fatalf("%s: %v, want %v", step.name, err, step.wantErr)
			}
			if status, ps := openPrompts(); status != step.wantStatus && !(status == bgtype.StatusCompleted && step.wantStatus == bgtype.StatusRunning) || !slices.Equal(ps, step.wantOpen) {
				t.Fatalf("after %s: %s %q, want %s %q", step.name, status, ps, step.wantStatus, step.wantOpen)
			}
		}
		want := []string{"A", "B", "error: context canceled"}
		for i := range prompts {
			if g := <-got[i]; g != want[i] {
				t.Errorf("request %s got %q, want %q", prompts[i], g, want[i])
			}
		}
		if end := waitTask(t, o, id); end.Status != bgtype.StatusCompleted || end.Input != nil || end.MoreInput != nil {
			t.Fatalf("end %s %+v %+v", end.Status, end.Input, end.MoreInput)
		}
	})
}

// send answers request in of task id as o.
func send(t *testing.T, o Owner, id, content, in string) error {
	t.Helper()
	_, err := o.Send(t.Context(), id, bgtype.Message{Content: content, InReplyTo: in})
	return err
}

// TestRequestInputOpenCap: a task may have MaxOpenInputs requests open at
// once; one more fails with ErrLimit and changes nothing.
func TestRequestInputOpenCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		extra := make(chan error, 1)
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			var wg sync.WaitGroup
			for i := range MaxOpenInputs {
				wg.Go(func() { _, _ = tk.RequestInput(ctx, fmt.Sprintf("q%d?", i)) })
			}
			synctest.Wait()
			_, err := tk.RequestInput(ctx, "one more?")
			extra <- err
			wg.Wait()
			return nil, ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		err = <-extra
		want := fmt.Sprintf("%v: task %s has %d open input requests (MaxOpenInputs)", ErrLimit, id, MaxOpenInputs)
		if !errors.Is(err, ErrLimit) || err.Error() != want {
			t.Fatalf("the request past the cap: %v, want %s", err, want)
		}
		meta := getTask(t, o, id)
		if open := meta.OpenInputs(); meta.Status != bgtype.StatusAwaitingInput || len(open) != MaxOpenInputs {
			t.Fatalf("record %s with %d open, want %d", meta.Status, len(open), MaxOpenInputs)
		}
		for _, in := range meta.OpenInputs() {
			if in.Prompt == "one more?" {
				t.Fatal("the refused request is on the record")
			}
		}
		if _, err := o.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Wait(t.Context(), id); err != nil && !errors.Is(err, ErrCanceled) {
			t.Fatal(err)
		}
	})
}
