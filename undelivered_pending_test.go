package bgtask

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// pendingFixture fills a MemoryStore as a process that is gone left it:
//
//	thread-news   a completed task never announced                 -> listed
//	thread-failed an announced task and a failed one never announced -> listed
//	thread-quiet  every end announced                               -> not listed
//	thread-hushed a silent task that ended, never announced          -> not listed
//	thread-busy   only a running task                               -> not listed
//	thread-parent owns task_dead, a sub-agent that ended (announced),
//	              which owns task_deadchild, ended, never announced   -> thread-parent listed, not task_dead
//	task_live     a running sub-agent (of thread-busy) owning task_livechild, ended, never announced -> task_live listed
//	task_like-a-thread  an owner id with the task prefix that names no task: a completed task never announced -> listed
func pendingFixture(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	rec := func(owner string, st bgtype.Status, announced bool, wake bgtype.WakePolicy) bgtype.TaskMeta {
		n++
		m := bgtype.TaskMeta{ID: fmt.Sprintf("task_%02d", n), Owner: owner, Status: st, CreatedAt: at.Add(time.Duration(n) * time.Second), Announced: announced, Wake: wake, Instance: "gone"}
		if st.IsTerminal() {
			m.StartedAt, m.FinishedAt = m.CreatedAt, m.CreatedAt
		} else if st == bgtype.StatusRunning {
			m.StartedAt = m.CreatedAt
		}
		return m
	}
	put := func(ms ...bgtype.TaskMeta) {
		for _, m := range ms {
			if err := s.Commit(context.Background(), m.Owner, store.UpsertAction(m)); err != nil {
				t.Fatalf("Commit %s: %v", m.ID, err)
			}
		}
	}
	put(rec("thread-news", bgtype.StatusCompleted, false, ""),
		rec("thread-failed", bgtype.StatusCompleted, true, ""), rec("thread-failed", bgtype.StatusFailed, false, bgtype.WakeOnTerminal),
		rec("thread-quiet", bgtype.StatusCompleted, true, ""), rec("thread-quiet", bgtype.StatusInterrupted, true, ""),
		rec("thread-hushed", bgtype.StatusCompleted, false, bgtype.WakeSilent),
		rec("thread-busy", bgtype.StatusRunning, false, ""),
		rec("task_like-a-thread", bgtype.StatusCompleted, false, ""))
	dead := rec("thread-parent", bgtype.StatusInterrupted, true, "")
	dead.ID, dead.Type = "task_dead", bgtype.TypeSubAgent
	deadChild := rec("task_dead", bgtype.StatusInterrupted, false, "")
	deadChild.ID = "task_deadchild"
	live := rec("thread-busy", bgtype.StatusRunning, false, "")
	live.ID, live.Type = "task_live", bgtype.TypeSubAgent
	liveChild := rec("task_live", bgtype.StatusCompleted, false, "")
	liveChild.ID = "task_livechild"
	put(dead, deadChild, live, liveChild)
	return s
}

// wantPending are the owners pendingFixture has news for, sorted.
var wantPending = []string{"task_like-a-thread", "task_live", "thread-failed", "thread-news", "thread-parent"}

// Manager.UndeliveredOwners lists each owner with an undelivered end once,
// a dead sub-agent's tasks under its nearest live owner.
func TestUndeliveredOwners(t *testing.T) {
	t.Parallel()
	s := pendingFixture(t)
	m := newTestManager(t, WithStore(s))
	var got []string
	for owner, err := range m.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, owner)
	}
	slices.Sort(got)
	if !slices.Equal(got, wantPending) {
		t.Fatalf("UndeliveredOwners = %q, want %q", got, wantPending)
	}
	// Once its loop took the news, an owner is no longer listed.
	if err := m.Owner("thread-news").MarkAnnounced(t.Context(), "task_01"); err != nil {
		t.Fatal(err)
	}
	got = nil
	for owner, err := range m.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, owner)
	}
	slices.Sort(got)
	if want := slices.DeleteFunc(slices.Clone(wantPending), func(o string) bool { return o == "thread-news" }); !slices.Equal(got, want) {
		t.Fatalf("after MarkAnnounced: %q, want %q", got, want)
	}
	// A done ctx: one error, nothing else.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var errs []error
	for owner, err := range m.UndeliveredOwners(ctx) {
		if owner != "" || err == nil {
			t.Fatalf("with a done ctx: yielded (%q, %v)", owner, err)
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("with a done ctx: %v, want one context.Canceled", errs)
	}
	shutdownManager(t, m)
}

// A Store that is not an UndeliveredLister lists nothing.
func TestUndeliveredOwnersUnsupportedStore(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithStore(struct{ store.Store }{pendingFixture(t)}))
	for owner, err := range m.UndeliveredOwners(t.Context()) {
		t.Fatalf("yielded (%q, %v) for a store that cannot list", owner, err)
	}
	shutdownManager(t, m)
}

// WithOnPendingOwner calls its function on a goroutine that Shutdown
// waits for, to the end of its pass: every pending owner is still called.
func TestWithOnPendingOwnerShutdownWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		calls := make(chan string, 16)
		m := newTestManager(t, WithStore(pendingFixture(t)), WithOnPendingOwner(func(owner string) {
			calls <- owner
			<-release
		}))
		synctest.Wait() // blocked in the first call
		done := make(chan error, 1)
		go func() { done <- m.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v while the callback ran", err)
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		close(calls)
		var got []string
		for o := range calls {
			got = append(got, o)
		}
		slices.Sort(got)
		if !slices.Equal(got, wantPending) {
			t.Fatalf("called with %q, want each of %q once", got, wantPending)
		}
	})
}

// Every pending owner is called exactly once; a panic in the function is logged and the next owner still called.
func TestWithOnPendingOwnerCallsEachOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := &captureHandler{}
		calls := make(chan string, 16)
		m := newTestManager(t, WithStore(pendingFixture(t)), WithLogger(slog.New(h)), WithOnPendingOwner(func(owner string) {
			calls <- owner
			if owner == "thread-news" {
				panic("host bug")
			}
		}))
		synctest.Wait()
		shutdownManager(t, m)
		close(calls)
		var got []string
		for o := range calls {
			got = append(got, o)
		}
		slices.Sort(got)
		if !slices.Equal(got, wantPending) {
			t.Fatalf("called with %q, want each of %q once", got, wantPending)
		}
		var panics []logged
		for _, r := range h.records() {
			if r.Msg == "bgtask: callback panicked" && r.Attrs["callback"] == "WithOnPendingOwner" {
				panics = append(panics, r)
			}
		}
		if len(panics) != 1 || panics[0].Attrs["about"] != "thread-news" || panics[0].Attrs["panic"] != "host bug" || panics[0].Level != slog.LevelError {
			t.Fatalf("logged panics %+v, want one error for thread-news", panics)
		}
	})
}
