package bgtask

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/storefake"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

type fakeShared = storefake.Shared

// remoteRecord is a running task of another instance, in the store.
func remoteRecord(t *testing.T, f *fakeShared, id string) bgtype.TaskMeta {
	t.Helper()
	meta := bgtype.TaskMeta{ID: id, Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, Instance: "other-instance", Attempt: 1}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(meta)); err != nil {
		t.Fatal(err)
	}
	return meta
}

func TestSharedStoreCancelReachesTheOtherInstance(t *testing.T) {
	f := &fakeShared{Store: memstore.New()}
	m := newTestManager(t, WithStore(f), WithInstance("this-instance"))
	remote := remoteRecord(t, f, "task_0190d5f4c5a87000a000000000000001")
	o := m.Owner("thread-1")
	if n, err := o.Cancel(t.Context(), remote.ID); err != nil || n != 1 {
		t.Fatalf("Cancel of a remote task: %d, %v; want 1, nil", n, err)
	}
	if n, err := m.CancelTree(t.Context(), remote.ID, WithReason("stop")); err != nil || n != 1 {
		t.Fatalf("CancelTree of a remote task: %d, %v; want 1, nil", n, err)
	}
	if want := []string{remote.ID, remote.ID + "+tree:stop"}; !slices.Equal(f.Requests, want) {
		t.Fatalf("Requests %v, want %v", f.Requests, want)
	}
	// Another owner's view never reaches it; a terminal record needs no request.
	if _, err := m.Owner("thread-2").Cancel(t.Context(), remote.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's cancel: %v, want ErrNotFound", err)
	}
	f.Fail = errors.New("db down")
	if _, err := o.Cancel(t.Context(), remote.ID); err == nil || err.Error() != `bgtask: cancel `+remote.ID+` on instance "other-instance": db down` {
		t.Fatalf("failing request: %v", err)
	}
	if len(f.Requests) != 2 {
		t.Fatalf("Requests %v after the refused ones, want 2", f.Requests)
	}
}

func TestSharedStoreRestoreLeavesOtherInstancesToTheReaper(t *testing.T) {
	f := &fakeShared{Store: memstore.New()}
	m := newTestManager(t, WithStore(f), WithInstance("this-instance"))
	remote := remoteRecord(t, f, "task_0190d5f4c5a87000a000000000000001")
	mine := bgtype.TaskMeta{ID: "task_0190d5f4c5a87000a000000000000002", Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, Instance: "this-instance", Attempt: 1}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(mine)); err != nil {
		t.Fatal(err)
	}
	done, err := m.Restore(t.Context(), "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].ID != mine.ID || done[0].Status != bgtype.StatusInterrupted {
		t.Fatalf("Restore interrupted %+v, want only this instance's own stale record", done)
	}
	if got, _ := f.Get(t.Context(), remote.ID); got.Status != bgtype.StatusRunning {
		t.Fatalf("the other instance's task is %s, want still running", got.Status)
	}
}

// A store that cannot give its notices makes Deliver fail without losing
// what else was waiting: the next call delivers it.
func TestPluginNoticeFailureKeepsEvents(t *testing.T) {
	f := &fakeShared{Store: memstore.New(), NoticeErr: errors.New("db down")}
	pr := newReceiverRun(t, WithStore(f))
	pr.p.keepLate(bgtype.Event{Kind: bgtype.EventCanceled, TaskID: "task_0190d5f4c5a87000a000000000000003"})
	if _, err := pr.p.Deliver(t.Context()); err == nil || err.Error() != "bgtask: receiver: notices: db down" {
		t.Fatalf("Deliver with the store down: %v", err)
	}
	f.Mu.Lock()
	f.NoticeErr = nil
	f.Mu.Unlock()
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil || len(msgs) != 1 || msgs[0].Kind != bgtype.EventCanceled {
		t.Fatalf("Deliver after the store came back: %v, %v; want the kept event", messageKinds(msgs), err)
	}
}

// A run whose restore fails is not open: its phases say ErrNoRun, and what
// arrives meanwhile waits for the next run.
func TestPluginRunStartRestoreFailure(t *testing.T) {
	store := &failingLoad{Store: memstore.New(), err: errors.New("disk gone")}
	m := newTestManager(t, WithStore(store))
	p, err := m.NewReceiver("thread-1", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err == nil || err.Error() != "bgtask: receiver: restore: disk gone" {
		t.Fatalf("RunStart: %v", err)
	}
	if _, err := p.Deliver(t.Context()); !errors.Is(err, ErrNoRun) {
		t.Fatalf("Deliver after a failed start: %v, want ErrNoRun", err)
	}
	id, err := m.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	store.err = nil
	if err := p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := p.Deliver(t.Context()); err != nil || len(msgs) != 1 || msgs[0].TaskID != id {
		t.Fatalf("next run delivered %v, %v; want the completion", messageKinds(msgs), err)
	}
}

// failingLoad is a MemoryStore whose Load and List fail while err is set.
type failingLoad struct {
	*memstore.Store
	err error
}

func (f *failingLoad) Load(ctx context.Context, owner string) (store.Snapshot, error) {
	if f.err != nil {
		return store.Snapshot{}, f.err
	}
	return f.Store.Load(ctx, owner)
}

func (f *failingLoad) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	if f.err != nil {
		return func(yield func(bgtype.TaskMeta, error) bool) { yield(bgtype.TaskMeta{}, f.err) }
	}
	return f.Store.List(ctx, owner, statuses...)
}

// CancelRun of a run whose tasks run on another instance asks that
// instance to cancel each attached one with its tree, with the reason, and
// counts them; another owner's run of the same id, a detached task and a
// task of another run are left alone.
func TestSharedStoreCancelRunReachesOtherInstances(t *testing.T) {
	f := &fakeShared{Store: memstore.New()}
	m := newTestManager(t, WithStore(f), WithInstance("this-instance"))
	put := func(id, owner, run string, detached bool, st bgtype.Status) {
		meta := bgtype.TaskMeta{ID: id, Owner: owner, Type: bgtype.TypeTask, Status: st, Instance: "other-instance", Attempt: 1,
			Parent: bgtype.Parent{RunID: run}, Detached: detached}
		if err := f.Commit(t.Context(), owner, store.UpsertAction(meta)); err != nil {
			t.Fatal(err)
		}
	}
	put("task_0190d5f4c5a87000a000000000000001", "thread-1", "run-1", false, bgtype.StatusRunning)
	put("task_0190d5f4c5a87000a000000000000002", "thread-1", "run-1", false, bgtype.StatusAwaitingInput)
	put("task_0190d5f4c5a87000a000000000000003", "thread-1", "run-1", true, bgtype.StatusRunning)
	put("task_0190d5f4c5a87000a000000000000004", "thread-1", "run-2", false, bgtype.StatusRunning)
	put("task_0190d5f4c5a87000a000000000000005", "thread-2", "run-1", false, bgtype.StatusRunning)
	put("task_0190d5f4c5a87000a000000000000006", "thread-1", "run-1", false, bgtype.StatusCompleted)
	// One of the run's tasks runs here.
	causes := make(chan error, 1)
	ctx := WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"})
	if _, err := m.Owner("thread-1").Spawn(ctx, causeTask(causes)); err != nil {
		t.Fatal(err)
	}
	n, err := m.Owner("thread-1").CancelRun("run-1", WithReason("user pressed stop"))
	if err != nil || n != 3 {
		t.Fatalf("CancelRun = %d, %v; want 3 (one here, two elsewhere)", n, err)
	}
	if cause := <-causes; cause.Error() != "bgtask: run cancelled: user pressed stop" {
		t.Fatalf("local cause %v", cause)
	}
	want := []string{"task_0190d5f4c5a87000a000000000000001+tree:user pressed stop", "task_0190d5f4c5a87000a000000000000002+tree:user pressed stop"}
	if !slices.Equal(f.Requests, want) {
		t.Fatalf("Requests %q, want %q", f.Requests, want)
	}
	f.Fail = errors.New("db down")
	if n, err := m.Owner("thread-1").CancelRun("run-1"); n != 0 || err == nil ||
		err.Error() != `bgtask: cancel run "run-1": task task_0190d5f4c5a87000a000000000000001 on another instance: db down` {
		t.Fatalf("CancelRun with a failing store = %d, %v", n, err)
	}
}
