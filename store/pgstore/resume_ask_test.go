package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// TestExhaustAskAcrossInstances: a task of a kind with one attempt and
// ExhaustAsk whose instance dies is re-queued, not interrupted; the
// instance that claims it asks the owner; the owner answers "resume"
// through another instance; the next attempt runs there from the
// checkpoint and the owner hears one end.
func TestExhaustAskAcrossInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	var (
		mu      sync.Mutex
		effects []string
	)
	started := make(chan struct{}, 1)
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	k, err := bgtask.NewKind("ask/v1", func(ctx context.Context, tk *bgtask.Task, _ stepsSpec, cp *bgtask.Checkpoint[stepsCursor]) (any, error) {
		last, _ := cp.Last()
		mu.Lock()
		effects = append(effects, fmt.Sprintf("attempt %d from %d", tk.Attempt(), last.Next))
		mu.Unlock()
		if tk.Attempt() == 1 {
			if err := cp.Save(ctx, stepsCursor{Next: 2}); err != nil {
				return nil, err
			}
			started <- struct{}{}
			select { // a process that hangs: its instance is declared dead
			case <-held:
			case <-ctx.Done():
			}
			return nil, nil
		}
		return "done", nil
	}, bgtask.KindConfig{Retry: bgtask.RetryPolicy{MaxAttempts: 1}, ExhaustAsk: true})
	if err != nil {
		t.Fatal(err)
	}
	_, ma := limitInstance(t, dsn, "inst_a", k)
	id, err := k.Spawn(t.Context(), ma.Owner("alice"), stepsSpec{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	killInstance(t, dsn, "inst_a")
	sb, mb := limitInstance(t, dsn, "inst_b", k)
	_, mc := limitInstance(t, dsn, "inst_c", k)
	reapN(t, sb, 1)
	if _, err := mc.ClaimWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	var meta bgtype.TaskMeta
	waitFor(t, "the owner asked", func() bool {
		meta, err = mb.Get(t.Context(), id)
		return err == nil && meta.Status == bgtype.StatusAwaitingInput
	})
	if meta.Attempt != 2 || meta.Resume.Rounds != 0 || meta.Input == nil {
		t.Fatalf("asked: %+v %+v", meta, meta.Resume)
	}
	want := fmt.Sprintf(`Task %s (kind ask/v1) gave up after 1 attempts: the runtime that ran it (instance "inst_a") is gone. Answer "resume" to run up to 1 more attempts from its last checkpoint, or "abandon" to end it with that error.`, id)
	if meta.Input.Prompt != want {
		t.Fatalf("prompt %q", meta.Input.Prompt)
	}
	// The owner answers through the instance that does not run the task.
	other := mb
	if meta.Instance == "inst_b" {
		other = mc
	}
	if _, err := other.Owner("alice").Send(t.Context(), id, bgtype.Message{From: "user", Content: "resume", InReplyTo: meta.Input.ID}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	meta = waitDone(t, mb, id)
	if meta.Status != bgtype.StatusCompleted || meta.Attempt != 2 || meta.Resume.Rounds != 1 || string(meta.Result) != `"done"` {
		t.Fatalf("after resume: %+v %+v", meta, meta.Resume)
	}
	mu.Lock()
	got := fmt.Sprint(effects)
	mu.Unlock()
	if got != "[attempt 1 from 0 attempt 2 from 2]" {
		t.Fatalf("effects %s", got)
	}
	seen := map[string]int{}
	run := startRun(t, mb, "alice", "run_alice", seen)
	run.step()
	run.step()
	run.end()
	if len(seen) != 1 || seen[id] != 1 {
		t.Fatalf("alice heard %v, want one end of %s", seen, id)
	}
}
