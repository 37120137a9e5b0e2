package bgtask

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// Restore (D11): what a gone runtime left queued or running becomes
// interrupted, fenced on a new attempt, with one event each in creation
// order; terminal records, other owners and what this Manager runs are left
// alone; a second Restore finds nothing.
func TestRestoreInterruptsWhatNoOneRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		at := clock.Now()
		old := func(id, owner string, st bgtype.Status, created time.Time) bgtype.TaskMeta {
			m := bgtype.TaskMeta{ID: id, Owner: owner, Type: bgtype.TypeTask, Status: st, CreatedAt: created, Instance: "inst_old", Attempt: 2}
			if st.IsTerminal() {
				m.FinishedAt = created
			}
			return m
		}
		for _, m := range []bgtype.TaskMeta{
			old("task_b_running", "a", bgtype.StatusRunning, at.Add(-time.Minute)),
			old("task_a_queued", "a", bgtype.StatusQueued, at.Add(-2*time.Minute)),
			old("task_c_done", "a", bgtype.StatusCompleted, at.Add(-3*time.Minute)),
			old("task_d_other", "b", bgtype.StatusRunning, at.Add(-4*time.Minute)),
		} {
			if err := st.Commit(t.Context(), m.Owner, store.UpsertAction(m)); err != nil {
				t.Fatal(err)
			}
		}
		var seen []Transition
		m := newTestManager(t, WithStore(st), WithObserver(func(tr Transition) { seen = append(seen, tr) }))
		release := make(chan struct{})
		liveID, err := m.Owner("a").Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
			<-release
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		seen = nil

		got, err := m.Restore(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, meta := range got {
			ids = append(ids, meta.ID)
			want := `bgtask: interrupted: the runtime that ran it (instance "inst_old") is gone; it will not be re-run`
			if meta.Status != bgtype.StatusInterrupted || meta.Attempt != 3 || meta.Error != want || meta.FinishedAt.IsZero() {
				t.Fatalf("restored %+v: want interrupted, attempt 3, error %q, a finish time", meta, want)
			}
		}
		if want := []string{"task_a_queued", "task_b_running"}; !slices.Equal(ids, want) {
			t.Fatalf("Restore interrupted %v, want %v (creation order)", ids, want)
		}
		ib, _ := m.Inbox("a")
		var evs []string
		for _, ev := range ib.Drain() {
			evs = append(evs, string(ev.Kind)+" "+ev.TaskID)
		}
		if want := []string{"interrupted task_a_queued", "interrupted task_b_running"}; !slices.Equal(evs, want) {
			t.Fatalf("owner events %v, want %v", evs, want)
		}
		if len(seen) != 2 || seen[0].From != bgtype.StatusQueued || seen[1].From != bgtype.StatusRunning || seen[1].To != bgtype.StatusInterrupted {
			t.Fatalf("observer saw %+v", seen)
		}
		for id, want := range map[string]bgtype.Status{"task_c_done": bgtype.StatusCompleted, "task_d_other": bgtype.StatusRunning, liveID: bgtype.StatusRunning} {
			if meta, err := m.Get(t.Context(), id); err != nil || meta.Status != want {
				t.Fatalf("%s: %q, %v; want %q, untouched", id, meta.Status, err, want)
			}
		}
		// A late write from the old runner, fenced on its attempt, changes nothing.
		late := old("task_b_running", "a", bgtype.StatusCompleted, at)
		if err := st.Commit(t.Context(), "a", store.UpsertAction(late)); err != nil {
			t.Fatal(err)
		}
		if meta, _ := m.Get(t.Context(), "task_b_running"); meta.Status != bgtype.StatusInterrupted {
			t.Fatalf("late write of the old runner changed the record to %q", meta.Status)
		}
		if again, err := m.Restore(t.Context(), "a"); err != nil || len(again) != 0 {
			t.Fatalf("second Restore = %v, %v; want nothing", again, err)
		}
		if got := m.Stats().Interrupted; got != 2 {
			t.Fatalf("Stats().Interrupted = %d, want 2", got)
		}
		close(release)
		shutdownManager(t, m)
		if _, err := m.Restore(t.Context(), "a"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Restore after Shutdown = %v, want ErrClosed", err)
		}
	})
}

// Bad input and a failing st: a clear error, nothing reported twice.
func TestRestoreErrors(t *testing.T) {
	m := newTestManager(t)
	if _, err := m.Restore(t.Context(), " "); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Fatalf("Restore(blank) = %v, want ErrInvalidArgument (blank owner)", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Restore(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Restore(cancelled ctx) = %v, want context.Canceled", err)
	}

	st := newFailingStore()
	if err := st.Store.Commit(t.Context(), "a", store.UpsertAction(bgtype.TaskMeta{ID: "task_x", Owner: "a", Status: bgtype.StatusRunning})); err != nil {
		t.Fatal(err)
	}
	st.fail(1, bgtype.StatusInterrupted)
	m2 := newTestManager(t, WithStore(st))
	if got, err := m2.Restore(t.Context(), "a"); !errors.Is(err, errInjected) || len(got) != 0 {
		t.Fatalf("Restore with a failing st = %v, %v; want the st's error and nothing", got, err)
	}
	got, err := m2.Restore(t.Context(), "a")
	if err != nil || len(got) != 1 || got[0].ID != "task_x" {
		t.Fatalf("Restore once the st works = %v, %v; want task_x", got, err)
	}
	ib, _ := m2.Inbox("a")
	if evs := ib.Drain(); len(evs) != 1 || evs[0].Kind != bgtype.EventInterrupted {
		t.Fatalf("events %+v, want one interrupted", evs)
	}
}

// The tasks an interrupted task owned (a sub-agent's, and theirs) are
// interrupted too, after it, and reported to the top owner: their own
// owners will never hear of them, and no inbox is made for those.
func TestRestoreFollowsInterruptedSubAgents(t *testing.T) {
	st := memstore.New()
	at := clock.Now()
	records := []bgtype.TaskMeta{
		{ID: "task_1_agent", Owner: "thread-1", Type: bgtype.TypeSubAgent, Status: bgtype.StatusRunning, CreatedAt: at.Add(-3 * time.Second), Instance: "gone", Attempt: 1},
		{ID: "task_2_fetch", Owner: "task_1_agent", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: at.Add(-2 * time.Second), Parent: bgtype.Parent{TaskID: "task_1_agent"}, Instance: "gone", Attempt: 1},
		{ID: "task_3_grand", Owner: "task_2_fetch", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: at.Add(-time.Second), Instance: "gone", Attempt: 1},
	}
	for _, r := range records {
		if err := st.Commit(t.Context(), r.Owner, store.UpsertAction(r)); err != nil {
			t.Fatal(err)
		}
	}
	m := newTestManager(t, WithStore(st))
	done, err := m.Restore(t.Context(), "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range done {
		ids = append(ids, d.ID)
	}
	if want := []string{"task_1_agent", "task_2_fetch", "task_3_grand"}; !slices.Equal(ids, want) {
		t.Fatalf("Restore interrupted %v, want %v", ids, want)
	}
	evs := drainOwner(t, m.Owner("thread-1"))
	if ks := eventKinds(evs); len(evs) != 3 || evs[0].TaskID != "task_1_agent" || evs[1].TaskID != "task_2_fetch" || evs[2].TaskID != "task_3_grand" ||
		!slices.Equal(ks, []bgtype.EventKind{bgtype.EventInterrupted, bgtype.EventInterrupted, bgtype.EventInterrupted}) {
		t.Fatalf("owner got %v, want the sub-agent's, then its task's, then that one's interrupted event", evs)
	}
	m.inboxMu.RLock()
	_, made1 := m.inboxes["task_1_agent"]
	_, made2 := m.inboxes["task_2_fetch"]
	m.inboxMu.RUnlock()
	if made1 || made2 {
		t.Fatal("Restore made an inbox for a gone owner")
	}
}
