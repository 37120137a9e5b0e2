package bgtask

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/testbuild"
	"github.com/bgtask/bgtask/store"
)

// memInternals is what the Manager and the MemoryStore hold, read under
// their locks.
type memInternals struct {
	nodes, owners, runs, deadRuns, queue, active, running, inboxes int
	storeOwners, storeIDs, storeDone                               int
}

func readInternals(m *Manager, s *memstore.Store) memInternals {
	var in memInternals
	m.mu.Lock()
	in.nodes, in.owners, in.runs, in.deadRuns = len(m.nodes), len(m.owners), len(m.runs), m.deadRuns.Len()
	in.queue, in.active, in.running = len(m.queue), m.active, m.running
	m.mu.Unlock()
	m.inboxMu.RLock()
	in.inboxes = len(m.inboxes)
	m.inboxMu.RUnlock()
	if s != nil {
		terminal, ids, owners := s.Contents()
		in.storeOwners, in.storeIDs, in.storeDone = len(owners), len(ids), len(terminal)
	}
	return in
}

// A Manager that has run many tasks for one owner keeps no handle of them
// and a bounded number of records.
func TestMemoryBoundedAfterManyTasks(t *testing.T) {
	t.Parallel()
	total, batch := 200_000, 1000
	switch {
	case testing.Short():
		total = 20_000
	case testbuild.Race():
		total = 100_000 // the race detector makes a task ~5x dearer; stay near 5s
	}
	store := memstore.New(memstore.WithRetainPerOwner(100))
	m := newTestManager(t, WithStore(store))
	o := m.Owner("a")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, *Task) (any, error) { return nil, nil }
	ids := make(map[string]bool, batch)
	var evs []bgtype.Event
	var last []string // the ids of the last batch
	for b := range total / batch {
		// Each batch is a run of its own, so the run index is exercised too.
		ctx := WithToolCall(context.Background(), ToolCall{RunID: fmt.Sprint("run-", b)})
		clear(ids)
		for i := range batch {
			id, err := o.Spawn(ctx, fn)
			if err != nil {
				t.Fatalf("batch %d spawn %d: %v", b, i, err)
			}
			ids[id] = true
			last = append(last[:i], id)
		}
		// The terminal events say the batch is done (its records are
		// mostly gone already: the store keeps 100).
		evs = evs[:0]
		for len(evs) < batch {
			if err := ib.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			evs = ib.AppendDrain(evs)
		}
		if len(evs) != batch {
			t.Fatalf("batch %d: %d events, want %d", b, len(evs), batch)
		}
		for _, ev := range evs {
			if ev.Kind != bgtype.EventCompleted || !ids[ev.TaskID] {
				t.Fatalf("batch %d: event %+v, want completed of a task of the batch", b, ev)
			}
			delete(ids, ev.TaskID)
		}
		if len(ids) != 0 {
			t.Fatalf("batch %d: %d tasks without an event", b, len(ids))
		}
	}

	// A task leaves the indexes just after its terminal event is sent; Wait
	// returns once it has (or reports the record gone, after retention).
	for _, id := range last {
		if _, err := m.Wait(context.Background(), id); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("Wait(%s): %v", id, err)
		}
	}
	got := readInternals(m, store)
	if got.nodes != 0 || got.owners != 0 || got.runs != 0 || got.deadRuns != 0 || got.queue != 0 {
		t.Fatalf("after %d tasks the Manager still indexes: %+v", total, got)
	}
	if got.inboxes != 1 || got.storeOwners != 1 || got.storeIDs != 100 || got.storeDone != 100 {
		t.Fatalf("after %d tasks: %d inboxes, store: %d owners, %d ids, %d terminal; want 1, 1, 100, 100",
			total, got.inboxes, got.storeOwners, got.storeIDs, got.storeDone)
	}
	snap, err := store.Load(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tasks) != 100 {
		t.Fatalf("store keeps %d records for the owner, want 100", len(snap.Tasks))
	}
	lastBatch := make(map[string]bool, batch)
	for _, ev := range evs {
		lastBatch[ev.TaskID] = true
	}
	for id, meta := range snap.Tasks {
		if meta.Status != bgtype.StatusCompleted || !lastBatch[id] {
			t.Fatalf("kept %s (%q), want only completed tasks of the last batch", id, meta.Status)
		}
	}
	shutdownManager(t, m)
	if got := readInternals(m, store); got.nodes+got.owners+got.runs+got.active+got.running != 0 {
		t.Fatalf("after Shutdown: %+v", got)
	}
}

// Cancelled runs are remembered, to refuse late spawns into them, up to
// Tuning.CanceledRunsKept of them (a negative value keeps none); the oldest are forgotten first.
func TestMemoryCanceledRunsKept(t *testing.T) {
	t.Parallel()
	for _, kept := range []int{0, 1, 8} {
		t.Run(fmt.Sprint("kept=", kept), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t, WithTuning(Tuning{CanceledRunsKept: cmp.Or(kept, -1)}))
				o := m.Owner("a")
				const runs = 20
				runCtx := func(i int) context.Context {
					return WithToolCall(context.Background(), ToolCall{RunID: fmt.Sprint("r-", i)})
				}
				for i := range runs {
					var id string
					if i%2 == 0 { // half the runs have a live task when cancelled
						var err error
						id, err = o.Spawn(runCtx(i), func(ctx context.Context, _ *Task) (any, error) {
							<-ctx.Done()
							return nil, context.Cause(ctx)
						})
						if err != nil {
							t.Fatal(err)
						}
					}
					n, err := m.CancelRun("a", fmt.Sprint("r-", i))
					if err != nil || n != 1-i%2 {
						t.Fatalf("CancelRun(r-%d) = (%d, %v), want (%d, nil)", i, n, err, 1-i%2)
					}
					if id != "" {
						meta := waitStatus(t, m, id, bgtype.StatusCanceled)
						if meta.Error != errRunCanceled.Error() {
							t.Fatalf("run task error %q, want %q", meta.Error, errRunCanceled.Error())
						}
					}
				}
				in := readInternals(m, nil)
				if in.runs != kept || in.deadRuns != kept || in.nodes != 0 || in.owners != 0 {
					t.Fatalf("after %d cancelled runs: %+v, want %d runs remembered and no task", runs, in, kept)
				}
				fn := func(context.Context, *Task) (any, error) { return nil, nil }
				for i := range runs {
					id, err := o.Spawn(runCtx(i), fn)
					if i >= runs-kept {
						want := fmt.Sprintf("%v: %q", errRunCanceled, fmt.Sprint("r-", i))
						if !errors.Is(err, errRunCanceled) || err.Error() != want {
							t.Fatalf("spawn into remembered cancelled run r-%d: %v, want %q", i, err, want)
						}
						continue
					}
					if err != nil {
						t.Fatalf("spawn into forgotten run r-%d: %v", i, err)
					}
					waitStatus(t, m, id, bgtype.StatusCompleted)
				}
				shutdownManager(t, m)
				if in := readInternals(m, nil); in.runs != kept || in.nodes != 0 {
					t.Fatalf("after Shutdown: %+v", in)
				}
			})
		})
	}
}

// WithRetainFor forgets terminal records once they finished longer ago than the
// age, on a later commit of any owner; non-terminal records stay.
func TestMemoryStoreRetainForAgesEveryOwner(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := memstore.New(memstore.WithRetainFor(time.Hour))
		rec := func(id, owner string, st bgtype.Status) bgtype.TaskMeta {
			m := bgtype.TaskMeta{ID: id, Owner: owner, Status: st, CreatedAt: clock.Now()}
			if st.IsTerminal() {
				m.FinishedAt = clock.Now()
			}
			return m
		}
		commit := func(m bgtype.TaskMeta) {
			t.Helper()
			if err := s.Commit(ctx, m.Owner, store.UpsertAction(m)); err != nil {
				t.Fatalf("Commit %s: %v", m.ID, err)
			}
		}
		has := func(want ...string) {
			t.Helper()
			var got []string
			for _, id := range []string{"task_run", "task_q", "task_a", "task_b", "task_x"} {
				if _, err := s.Get(ctx, id); err == nil {
					got = append(got, id)
				} else if !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("store keeps %v, want %v", got, want)
			}
		}
		commit(rec("task_run", "a", bgtype.StatusRunning))
		commit(rec("task_q", "a", bgtype.StatusQueued))
		commit(rec("task_a", "a", bgtype.StatusCompleted))
		<-time.After(40 * time.Minute)
		commit(rec("task_b", "a", bgtype.StatusFailed))
		<-time.After(20 * time.Minute)
		// task_a finished exactly an hour ago: not older than the age yet.
		// Ages are checked by commits that end a task, here of another owner.
		commit(rec("task_x", "b", bgtype.StatusRunning))
		commit(rec("task_y1", "b", bgtype.StatusCompleted))
		has("task_run", "task_q", "task_a", "task_b", "task_x")
		<-time.After(time.Microsecond)
		has("task_run", "task_q", "task_a", "task_b", "task_x") // nothing without a commit
		commit(rec("task_x", "b", bgtype.StatusRunning))        // does not end a task: no check
		has("task_run", "task_q", "task_a", "task_b", "task_x")
		commit(rec("task_y2", "b", bgtype.StatusCompleted))
		has("task_run", "task_q", "task_b", "task_x")
		<-time.After(24 * time.Hour)
		commit(rec("task_y3", "b", bgtype.StatusCompleted))
		has("task_run", "task_q", "task_x")
		snap, err := s.Load(ctx, "a")
		if err != nil || len(snap.Tasks) != 2 {
			t.Fatalf("Load(a) = (%d tasks, %v), want the 2 non-terminal ones", len(snap.Tasks), err)
		}
		// Terminal now, and forgotten a day later.
		done := rec("task_run", "a", bgtype.StatusCompleted)
		commit(done)
		<-time.After(25 * time.Hour)
		commit(rec("task_y4", "b", bgtype.StatusCompleted))
		has("task_q", "task_x")
		kept, _, _ := s.Contents()
		terminal := len(kept)
		if terminal != 1 {
			t.Fatalf("terminal list holds %d entries, want 1 (task_y4)", terminal)
		}
	})
}

// WithRetainPerOwner keeps the most recently finished terminal records of each
// owner; running and queued ones are never counted or dropped.
func TestMemoryStoreRetainPerOwnerCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		keep int
		want []string // terminal records kept
	}{
		{0, nil},
		{1, []string{"task_b"}},
		{2, []string{"task_a", "task_b"}},
		{5, []string{"task_a", "task_b", "task_c"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("keep=", tc.keep), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				s := memstore.New(memstore.WithRetainPerOwner(tc.keep))
				ids := []string{"task_a", "task_b", "task_c"}
				for _, id := range append(ids, "task_q", "task_r") {
					st := bgtype.StatusRunning
					if id == "task_q" {
						st = bgtype.StatusQueued
					}
					if err := s.Commit(ctx, "o", store.UpsertAction(bgtype.TaskMeta{ID: id, Owner: "o", Status: st})); err != nil {
						t.Fatal(err)
					}
				}
				// Finish in the order c, a, b (not the creation order).
				for _, id := range []string{"task_c", "task_a", "task_b"} {
					<-time.After(time.Second)
					if err := s.Commit(ctx, "o", store.UpsertAction(bgtype.TaskMeta{ID: id, Owner: "o", Status: bgtype.StatusCompleted, FinishedAt: clock.Now()})); err != nil {
						t.Fatal(err)
					}
				}
				// Another owner's records do not count against this one.
				for i := range 3 {
					id := fmt.Sprint("task_other", i)
					if err := s.Commit(ctx, "p", store.UpsertAction(bgtype.TaskMeta{ID: id, Owner: "p", Status: bgtype.StatusCompleted, FinishedAt: clock.Now()})); err != nil {
						t.Fatal(err)
					}
				}
				snap, err := s.Load(ctx, "o")
				if err != nil {
					t.Fatal(err)
				}
				var terminal []string
				for id, meta := range snap.Tasks {
					if meta.Status.IsTerminal() {
						terminal = append(terminal, id)
					}
				}
				slices.Sort(terminal)
				if !slices.Equal(terminal, tc.want) {
					t.Fatalf("terminal records kept %v, want %v", terminal, tc.want)
				}
				for _, id := range []string{"task_q", "task_r"} {
					if _, ok := snap.Tasks[id]; !ok {
						t.Fatalf("non-terminal %s dropped", id)
					}
				}
				other, err := s.Load(ctx, "p")
				if err != nil || len(other.Tasks) != min(tc.keep, 3) {
					t.Fatalf("owner p keeps %d records (%v), want %d", len(other.Tasks), err, min(tc.keep, 3))
				}
			})
		})
	}
}

// Through a Manager: old terminal records go with a later spawn's commit,
// a running task's record stays however old.
func TestMemoryRetentionThroughManager(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithRetainFor(time.Hour), memstore.WithRetainPerOwner(2))
		m := newTestManager(t, WithStore(store))
		long := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		var done []string
		for range 3 {
			id := spawnFor(t, m, "a", func(context.Context, *Task) (any, error) { return "ok", nil })
			waitStatus(t, m, id, bgtype.StatusCompleted)
			done = append(done, id)
			<-time.After(time.Minute)
		}
		// The count limit already dropped the first.
		if _, err := m.Get(t.Context(), done[0]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(oldest of 3 with WithRetainPerOwner(2)) = %v, want ErrNotFound", err)
		}
		for _, id := range done[1:] {
			getTask(t, m, id)
		}
		<-time.After(2 * time.Hour)
		fresh := spawnFor(t, m, "b", func(context.Context, *Task) (any, error) { return nil, nil })
		waitStatus(t, m, fresh, bgtype.StatusCompleted)
		for _, id := range done {
			if _, err := m.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get(%s) two hours after it finished: %v, want ErrNotFound", id, err)
			}
		}
		if _, err := m.Owner("a").Wait(t.Context(), done[2]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Wait on a forgotten task: %v, want ErrNotFound", err)
		}
		if meta := getTask(t, m, long); meta.Status != bgtype.StatusRunning {
			t.Fatalf("long task: %q, want running (never dropped)", meta.Status)
		}
		if listed := taskIDs(listTasks(t, m.Owner("a"))); !slices.Equal(listed, []string{long}) {
			t.Fatalf("List(a) = %v, want only the running task %s", listed, long)
		}
		shutdownManager(t, m)
	})
}

// A terminal record without a finish stamp (written by a host, or restored
// from an older store) has no known age; WithRetainFor must not take it for
// infinitely old and forget it in the very commit that wrote it.
func TestMemoryStoreRetainForUnstampedRecord(t *testing.T) {
	t.Parallel()
	var bug string
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithRetainFor(time.Hour))
		rec := bgtype.TaskMeta{ID: "task_i", Owner: "a", Status: bgtype.StatusInterrupted, Error: "process gone"}
		if err := s.Commit(t.Context(), "a", store.UpsertAction(rec)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(t.Context(), "task_i")
		switch {
		case errors.Is(err, ErrNotFound):
			bug = "retention must count from the commit: " +
				"a terminal record committed without FinishedAt is forgotten by the same Commit"
		case err != nil || got.Status != bgtype.StatusInterrupted:
			t.Fatalf("Get = (%+v, %v), want the interrupted record", got, err)
		}
	})
	if bug != "" {
		t.Fatal(bug)
	}
}
