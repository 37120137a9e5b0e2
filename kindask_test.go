package bgtask

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// answerInput answers the one open input request of task id with content
// and returns the request's prompt, once the task's backoffs are over; the owner's events so far must be
// exactly one input request.
func answerInput(t *testing.T, o Owner, id, content string) string {
	t.Helper()
	time.Sleep(time.Hour) // fake time (synctest): every backoff is over
	synctest.Wait()
	evs := drainOwner(t, o)
	if len(evs) != 1 || evs[0].Kind != bgtype.EventInputRequested || evs[0].TaskID != id {
		t.Fatalf("events %v, want one input request of %s", eventKinds(evs), id)
	}
	if _, err := o.Send(t.Context(), id, bgtype.Message{From: "user", Content: content, InReplyTo: evs[0].Input.ID}); err != nil {
		t.Fatalf("Send(%q): %v", content, err)
	}
	return evs[0].Input.Prompt
}

// TestKindExhaustAskAbandon: with ExhaustAsk, a task whose 2 attempts
// failed asks its owner once; "abandon" ends it failed with the last
// error and the owner gets exactly one end.
func TestKindExhaustAskAbandon(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			calls++
			return nil, fmt.Errorf("boom %d", calls)
		}, KindConfig{Retry: RetryPolicy{MaxAttempts: 2}, ExhaustAsk: true})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, err := k.Spawn(t.Context(), o, crawlSpec{})
		if err != nil {
			t.Fatal(err)
		}
		prompt := answerInput(t, o, id, " Abandon ")
		want := fmt.Sprintf(`Task %s (kind crawl/v1) gave up after 2 attempts: boom 2. Answer "resume" to run up to 2 more attempts from its last checkpoint, or "abandon" to end it with that error.`, id)
		if prompt != want {
			t.Fatalf("prompt %q\nwant   %q", prompt, want)
		}
		meta := waitStatus(t, o, id, bgtype.StatusFailed)
		if meta.Error != "gave up after 2 attempts (kind crawl/v1): boom 2" || meta.Attempt != 2 || calls != 2 || meta.Input != nil {
			t.Fatalf("error %q attempt %d calls %d input %v", meta.Error, meta.Attempt, calls, meta.Input)
		}
		if evs := drainOwner(t, o); fmt.Sprint(eventKinds(evs)) != "[failed]" {
			t.Fatalf("events %v", eventKinds(evs))
		}
	})
}

// TestKindExhaustAskResume: "resume" runs another round of attempts from
// the last checkpoint (an answer that is neither word is asked again); the
// task completes on attempt 3 of 4, with one end.
func TestKindExhaustAskResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var from []int
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			last, _ := cp.Last()
			from = append(from, last.Page)
			if tk.Attempt() < 3 {
				if err := cp.Save(ctx, crawlCursor{Page: tk.Attempt() * 10}); err != nil {
					return nil, err
				}
				return nil, errors.New("boom")
			}
			return "done", nil
		}, KindConfig{Retry: RetryPolicy{MaxAttempts: 2}, ExhaustAsk: true})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{})
		answerInput(t, o, id, "maybe")
		if prompt := answerInput(t, o, id, "resume"); !strings.HasPrefix(prompt, `Answer "resume" or "abandon" (the answer was "maybe"). Task `) {
			t.Fatalf("second prompt %q", prompt)
		}
		meta := waitStatus(t, o, id, bgtype.StatusCompleted)
		r := meta.Resume
		if fmt.Sprint(from) != "[0 10 20]" || meta.Attempt != 3 || r.Rounds != 1 || r.Limit() != 4 || r.LastError != "boom" {
			t.Fatalf("from %v attempt %d resume %+v", from, meta.Attempt, r)
		}
		if evs := drainOwner(t, o); fmt.Sprint(eventKinds(evs)) != "[completed]" {
			t.Fatalf("events %v", eventKinds(evs))
		}
	})
}
