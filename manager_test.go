package bgtask

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

func TestManagerOwnerViewsHideOtherOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		a, b := m.Owner("thread-A"), m.Owner("thread-B")
		liveID, probe := spawnProbe(t, t.Context(), b, WithName("worker"))
		agentProbe := newProbe()
		agentID, err := b.SpawnAgent(t.Context(), agentProbe.fn)
		if err != nil {
			t.Fatal(err)
		}
		<-agentProbe.started
		doneID, err := b.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "secret", nil })
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, b, doneID)

		for _, id := range []string{liveID, agentID, doneID} {
			if _, err := a.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%s) from another owner: %v, want ErrNotFound", id, err)
			}
			if n, err := a.Cancel(t.Context(), id); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Errorf("Cancel(%s) from another owner: %d, %v; want 0, ErrNotFound", id, n, err)
			}
			if n, err := a.CancelTree(t.Context(), id); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Errorf("CancelTree(%s) from another owner: %d, %v; want 0, ErrNotFound", id, n, err)
			}
			if _, err := a.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Wait(%s) from another owner: %v, want ErrNotFound", id, err)
			}
			_, err := a.Send(t.Context(), id, bgtype.Message{From: "intruder", Content: "hi"})
			if !errors.Is(err, ErrNotFound) || errors.Is(err, errNotOwner) || errors.Is(err, ErrTerminal) {
				t.Errorf("Send(%s) from another owner: %v, want only ErrNotFound", id, err)
			}
		}
		if got := listTasks(t, a); len(got) != 0 {
			t.Fatalf("thread-A lists %v", taskIDs(got))
		}
		// Nothing reached B's tasks.
		synctest.Wait()
		if probe.ctxErr(t) != nil || agentProbe.ctxErr(t) != nil {
			t.Fatal("another owner's cancel reached the tasks")
		}
		if n := agentProbe.task.Inbox().Len(); n != 0 {
			t.Fatalf("another owner's Send reached the sub-agent: %d event(s)", n)
		}
		if got := taskIDs(listTasks(t, b, bgtype.StatusRunning)); !slices.Equal(got, []string{liveID, agentID}) {
			t.Fatalf("thread-B running = %v", got)
		}
		// The owner itself sees them.
		if got, err := b.Get(t.Context(), doneID); err != nil || string(got.Result) != `"secret"` {
			t.Fatalf("owner Get: %+v, %v", got, err)
		}
		shutdownManager(t, m)
	})
}

func TestManagerUnknownIDs(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	const id = "task_00000000000000000000000000000000"
	if _, err := m.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Manager.Get: %v", err)
	}
	if _, err := o.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Owner.Get: %v", err)
	}
	if _, err := m.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Manager.Wait: %v", err)
	}
	if _, err := o.Wait(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Owner.Wait: %v", err)
	}
	if _, err := m.Owner(" ").Get(t.Context(), id); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Errorf("blank owner Get: %v", err)
	}
	if err := listErr(m.Owner("").List(t.Context())); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Errorf("empty owner List: %v", err)
	}
	if _, err := m.Owner("").Wait(t.Context(), id); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Errorf("empty owner Wait: %v", err)
	}
	shutdownManager(t, m)
}

func TestManagerListOrderAndFilter(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	other := m.Owner("thread-2")
	spawnProbe(t, t.Context(), other)

	var all, running, completed, failed []string
	for i := range 9 {
		var id string
		switch i % 3 {
		case 0:
			id, _ = spawnProbe(t, t.Context(), o)
			running = append(running, id)
		case 1:
			var err error
			id, err = o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return i, nil })
			if err != nil {
				t.Fatal(err)
			}
			waitTask(t, o, id)
			completed = append(completed, id)
		case 2:
			var err error
			id, err = o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, errors.New("x") })
			if err != nil {
				t.Fatal(err)
			}
			waitTask(t, o, id)
			failed = append(failed, id)
		}
		all = append(all, id)
	}
	mergeInOrder := func(sets ...[]string) []string {
		var out []string
		for _, id := range all {
			for _, s := range sets {
				if slices.Contains(s, id) {
					out = append(out, id)
				}
			}
		}
		return out
	}
	cases := []struct {
		statuses []bgtype.Status
		want     []string
	}{
		{nil, all},
		{[]bgtype.Status{bgtype.StatusRunning}, running},
		{[]bgtype.Status{bgtype.StatusCompleted}, completed},
		{[]bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed}, mergeInOrder(completed, failed)},
		{[]bgtype.Status{bgtype.StatusFailed, bgtype.StatusRunning}, mergeInOrder(failed, running)},
		{[]bgtype.Status{bgtype.StatusQueued}, nil},
		{[]bgtype.Status{bgtype.StatusCanceled, bgtype.StatusInterrupted}, nil},
		{bgtype.Statuses(), all},
	}
	for _, tc := range cases {
		got := listTasks(t, o, tc.statuses...)
		if ids := taskIDs(got); !slices.Equal(ids, tc.want) && (len(ids) != 0 || len(tc.want) != 0) {
			t.Errorf("List(%v) = %v, want %v", tc.statuses, ids, tc.want)
		}
		for _, meta := range got {
			if meta.Owner != "thread-1" {
				t.Errorf("List(%v) leaked %s of %s", tc.statuses, meta.ID, meta.Owner)
			}
		}
	}
	for _, bad := range []bgtype.Status{"bogus", "", "Running"} {
		if err := listErr(o.List(t.Context(), bgtype.StatusRunning, bad)); !errors.Is(err, bgtype.ErrInvalidStatus) {
			t.Errorf("List(%q) = %v, want ErrInvalidStatus", bad, err)
		}
	}
	shutdownManager(t, m)
}

// TestManagerClosed: after Shutdown, changes are refused with ErrClosed and
// reads keep working.
func TestManagerClosed(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "kept", nil })
	if err != nil {
		t.Fatal(err)
	}
	agentID, p := func() (string, *probeTask) {
		p := newProbe()
		id, err := o.SpawnAgent(t.Context(), p.fn)
		if err != nil {
			t.Fatal(err)
		}
		<-p.started
		return id, p
	}()
	waitTask(t, o, id)
	shutdownManager(t, m)
	if c := <-p.cause; !errors.Is(c, ErrShutdown) {
		t.Fatalf("cause at shutdown %v, want ErrShutdown", c)
	}
	if got := waitTask(t, o, agentID); got.Status != bgtype.StatusCanceled {
		t.Fatalf("sub-agent after shutdown: %+v", got)
	}
	if _, err := o.Spawn(t.Context(), newProbe().fn); !errors.Is(err, ErrClosed) {
		t.Errorf("Spawn: %v", err)
	}
	if _, err := o.SpawnAgent(t.Context(), newProbe().fn); !errors.Is(err, ErrClosed) {
		t.Errorf("SpawnAgent: %v", err)
	}
	if _, err := m.Cancel(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("Cancel: %v", err)
	}
	if _, err := m.CancelTree(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelTree: %v", err)
	}
	if _, err := o.Cancel(t.Context(), id); !errors.Is(err, ErrClosed) {
		t.Errorf("Owner.Cancel: %v", err)
	}
	if _, err := m.Owner("thread-1").CancelAll(); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelAll: %v", err)
	}
	if _, err := o.CancelAll(); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelAll: %v", err)
	}
	if _, err := m.CancelRun("thread-1", "run-1"); !errors.Is(err, ErrClosed) {
		t.Errorf("CancelRun: %v", err)
	}
	if _, err := m.Send(t.Context(), "thread-1", agentID, bgtype.Message{Content: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send: %v", err)
	}
	if _, err := o.Send(t.Context(), agentID, bgtype.Message{Content: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Owner.Send: %v", err)
	}
	// Reads still work.
	if got, err := o.Get(t.Context(), id); err != nil || string(got.Result) != `"kept"` {
		t.Errorf("Get after shutdown: %+v, %v", got, err)
	}
	if got := taskIDs(listTasks(t, o)); !slices.Equal(got, []string{id, agentID}) {
		t.Errorf("List after shutdown: %v", got)
	}
	if got, err := m.Wait(t.Context(), id); err != nil || got.Status != bgtype.StatusCompleted {
		t.Errorf("Wait after shutdown: %+v, %v", got, err)
	}
	evs := drainOwner(t, o)
	if ks := eventKinds(evs); !slices.Equal(ks, []bgtype.EventKind{bgtype.EventCompleted, bgtype.EventCanceled}) {
		t.Errorf("events after shutdown: %v", ks)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}
