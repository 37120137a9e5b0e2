package bgtask

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/storefake"
	"github.com/bgtask/bgtask/store"
)

// waitResult is what a Wait returned.
type waitResult struct {
	meta bgtype.TaskMeta
	err  error
}

// goWait runs wait in a goroutine and returns where its result arrives.
func goWait(ctx context.Context, wait func(context.Context, string) (bgtype.TaskMeta, error), id string) <-chan waitResult {
	c := make(chan waitResult, 1)
	go func() {
		meta, err := wait(ctx, id)
		c <- waitResult{meta, err}
	}()
	return c
}

// remoteEnds commits meta as another instance would, on f. Whether the
// waiter registered before or after, it sees the commit: it reads the
// record after registering.
func remoteEnds(t *testing.T, f store.Store, meta bgtype.TaskMeta) {
	t.Helper()
	if err := f.Commit(t.Context(), meta.Owner, store.UpsertAction(meta)); err != nil {
		t.Fatal(err)
	}
}

// Wait on a task that another instance runs blocks until its record is
// terminal, and returns what a local wait returns: the record, a
// *TaskError for a failed one; WaitSettled returns at awaiting input;
// another owner's view gets not found at once.
func TestWaitForTaskElsewhere(t *testing.T) {
	f := &storefake.Notifying{Shared: &fakeShared{Store: memstore.New()}}
	m := newTestManager(t, WithStore(f), WithInstance("this-instance"))
	o := m.Owner("thread-1")
	remote := remoteRecord(t, f.Shared, "task_0190d5f4c5a87000a000000000000001")

	if _, err := m.Owner("thread-2").Wait(t.Context(), remote.ID); !errors.Is(err, ErrNotFound) || err.Error() != "bgtask: task not found: "+remote.ID {
		t.Fatalf("another owner's Wait = %v, want not found", err)
	}

	done := goWait(t.Context(), o.Wait, remote.ID)
	failed := remote
	failed.Status, failed.Error, failed.ErrorKind = bgtype.StatusFailed, "boom", "tool"
	failed.FinishedAt = time.Unix(1, 0).UTC()
	remoteEnds(t, f, failed)
	got := <-done
	var te *TaskError
	if got.meta.Status != bgtype.StatusFailed || !errors.As(got.err, &te) || te.Message != "boom" || te.TaskID != remote.ID {
		t.Fatalf("Wait = %s, %v; want failed with a *TaskError", got.meta.Status, got.err)
	}

	// WaitSettled returns at awaiting input, Wait does not.
	asking := remoteRecord(t, f.Shared, "task_0190d5f4c5a87000a000000000000002")
	settled := goWait(t.Context(), o.WaitSettled, asking.ID)
	ctx, cancel := context.WithCancel(t.Context())
	waiting := goWait(ctx, m.Wait, asking.ID)
	asking.Status, asking.Input = bgtype.StatusAwaitingInput, &bgtype.InputRequest{ID: "in_1", Prompt: "which one?"}
	remoteEnds(t, f, asking)
	if got := <-settled; got.err != nil || got.meta.Status != bgtype.StatusAwaitingInput || got.meta.Input == nil || got.meta.Input.Prompt != "which one?" {
		t.Fatalf("WaitSettled = %+v, %v; want awaiting input", got.meta, got.err)
	}
	cancel()
	if got := <-waiting; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("Wait at awaiting input = %s, %v; want it still waiting until ctx ended", got.meta.Status, got.err)
	}

	// A lost notification: the poll reads the record (at every tick, until
	// it is terminal: no outcome depends on the interval).
	lost := remoteRecord(t, f.Shared, "task_0190d5f4c5a87000a000000000000003")
	f.Quiet.Store(true)
	f.Poll = time.Millisecond
	done = goWait(t.Context(), m.Wait, lost.ID)
	lost.Status, lost.FinishedAt = bgtype.StatusCompleted, time.Unix(2, 0).UTC()
	remoteEnds(t, f, lost)
	if got := <-done; got.err != nil || got.meta.Status != bgtype.StatusCompleted {
		t.Fatalf("Wait = %s, %v", got.meta.Status, got.err)
	}
}
