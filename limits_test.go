package bgtask

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// startLog records, in order, the names of the task functions that started.
type startLog struct {
	mu    sync.Mutex
	names []string
}

func (l *startLog) add(name string) {
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

func (l *startLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.names)
}

// gated returns a task function that logs name when it starts, then blocks
// until release is closed and completes with name as its result. It ignores
// cancellation on purpose.
func gated(log *startLog, name string, release <-chan struct{}) Func {
	return func(ctx context.Context, t *Task) (any, error) {
		log.add(name)
		<-release
		return name, nil
	}
}

// gate returns a channel that the test closes to release a task; a cleanup
// closes it if the test did not (after a failure).
func gate(t *testing.T) chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-ch:
		default:
			close(ch)
		}
	})
	return ch
}

// sortedPrefix returns names with its first n entries sorted: tasks that
// start at the same moment start in any order.
func sortedPrefix(names []string, n int) []string {
	names = slices.Clone(names)
	slices.Sort(names[:min(n, len(names))])
	return names
}

func TestLimitRefusesWhenFullWithoutQueue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opt       Option
		fullOwner string // an owner whose extra spawn is refused
		freeOwner string // an owner whose spawn still succeeds ("" if none)
		wantText  string
	}{
		{
			name:      "global",
			opt:       WithLimits(Limits{MaxConcurrent: 2}),
			fullOwner: "b",
			// b runs nothing: the text must not count a's tasks.
			wantText: "bgtask: concurrency limit reached (Limits.MaxConcurrent)",
		},
		{
			name:      "per owner",
			opt:       WithLimits(Limits{MaxConcurrentPerOwner: 2}),
			fullOwner: "a",
			freeOwner: "b",
			wantText:  "bgtask: concurrency limit reached: 2 of this owner's tasks running (Limits.MaxConcurrentPerOwner)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t, tc.opt)
				var log startLog
				rel0, rel1 := gate(t), gate(t)
				id0 := spawnFor(t, m, "a", gated(&log, "w0", rel0))
				id1 := spawnFor(t, m, "a", gated(&log, "w1", rel1))
				synctest.Wait()

				ran := false
				never := func(ctx context.Context, t *Task) (any, error) { ran = true; return nil, nil }
				o := m.Owner(tc.fullOwner)
				spawns := []struct {
					name string
					call func() (string, error)
				}{
					{"Spawn", func() (string, error) { return o.Spawn(t.Context(), never, WithName("extra")) }},
					{"SpawnAgent", func() (string, error) { return o.SpawnAgent(t.Context(), never, WithName("extra")) }},
				}
				for _, s := range spawns {
					id, err := s.call()
					if !errors.Is(err, ErrLimit) {
						t.Fatalf("%s over the limit: err %v, want ErrLimit", s.name, err)
					}
					if err.Error() != tc.wantText {
						t.Fatalf("%s over the limit: error text %q, want %q", s.name, err.Error(), tc.wantText)
					}
					if id != "" {
						t.Fatalf("%s over the limit returned id %q, want none", s.name, id)
					}
				}
				synctest.Wait()
				if ran {
					t.Fatal("a refused task's function ran")
				}
				wantCount := 0
				if tc.fullOwner == "a" {
					wantCount = 2
				}
				if n := countRecords(t, m, tc.fullOwner); n != wantCount {
					t.Fatalf("store holds %d records for %q after refused spawns, want %d", n, tc.fullOwner, wantCount)
				}
				if got := sortedPrefix(log.get(), 2); !slices.Equal(got, []string{"w0", "w1"}) {
					t.Fatalf("started %v, want [w0 w1]", got)
				}
				m.mu.Lock()
				nodes, active := len(m.nodes), m.active
				m.mu.Unlock()
				if nodes != 2 || active != 2 {
					t.Fatalf("after refused spawns: %d nodes, %d active, want 2 and 2", nodes, active)
				}

				if tc.freeOwner != "" {
					relB := gate(t)
					idB := spawnFor(t, m, tc.freeOwner, gated(&log, "b0", relB))
					close(relB)
					waitStatus(t, m, idB, bgtype.StatusCompleted)
				}

				// A slot frees when a task ends; the refused name is free too.
				close(rel0)
				waitStatus(t, m, id0, bgtype.StatusCompleted)
				relX := gate(t)
				idX, err := o.Spawn(t.Context(), gated(&log, "extra", relX), WithName("extra"))
				if err != nil {
					t.Fatalf("Spawn after a slot freed: %v", err)
				}
				if meta := getTask(t, m, idX); meta.Status != bgtype.StatusRunning || meta.Name != "extra" {
					t.Fatalf("spawn after a slot freed: status %q name %q, want running extra", meta.Status, meta.Name)
				}
				if _, err := o.Spawn(t.Context(), never); !errors.Is(err, ErrLimit) {
					t.Fatalf("spawn with the slots full again: err %v, want ErrLimit", err)
				}
				close(rel1)
				close(relX)
				waitStatus(t, m, id1, bgtype.StatusCompleted)
				waitStatus(t, m, idX, bgtype.StatusCompleted)
				shutdownManager(t, m)
				if ran {
					t.Fatal("a refused task's function ran")
				}
			})
		})
	}
}

func TestLimitQueueStartsInFIFOOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
		var log startLog
		names := []string{"q0", "q1", "q2", "q3", "q4"}
		rel := make([]chan struct{}, len(names))
		ids := make([]string, len(names))
		for i, n := range names {
			rel[i] = gate(t)
			ids[i] = spawnFor(t, m, "a", gated(&log, n, rel[i]), WithName(n))
		}
		synctest.Wait()
		if got := log.get(); !slices.Equal(got, names[:1]) {
			t.Fatalf("started %v, want [q0]", got)
		}
		if meta := getTask(t, m, ids[0]); meta.Status != bgtype.StatusRunning || !meta.StartedAt.Equal(meta.CreatedAt) {
			t.Fatalf("q0: status %q started %v created %v, want running, started at creation", meta.Status, meta.StartedAt, meta.CreatedAt)
		}
		for i := 1; i < len(names); i++ {
			meta := getTask(t, m, ids[i])
			if meta.Status != bgtype.StatusQueued || !meta.StartedAt.IsZero() || meta.CreatedAt.IsZero() {
				t.Fatalf("%s: status %q started %v created %v, want queued, no start stamp", names[i], meta.Status, meta.StartedAt, meta.CreatedAt)
			}
		}
		if n := len(listTasks(t, m.Owner("a"), bgtype.StatusQueued)); n != 4 {
			t.Fatalf("List(queued) has %d tasks, want 4", n)
		}

		for i := range names {
			<-time.After(time.Second) // fake time, so start stamps are exact
			close(rel[i])
			waitStatus(t, m, ids[i], bgtype.StatusCompleted)
			synctest.Wait()
			want := names[:min(i+2, len(names))]
			if got := log.get(); !slices.Equal(got, want) {
				t.Fatalf("after releasing %s started %v, want %v", names[i], got, want)
			}
			if i+1 < len(names) {
				next := getTask(t, m, ids[i+1])
				wantStart := next.CreatedAt.Add(time.Duration(i+1) * time.Second)
				if next.Status != bgtype.StatusRunning || !next.StartedAt.Equal(wantStart) {
					t.Fatalf("%s: status %q started %v, want running started %v", names[i+1], next.Status, next.StartedAt, wantStart)
				}
			}
		}
		shutdownManager(t, m)
	})
}

func TestLimitQueuedTaskCanceled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cancel func(m *Manager, id string) (int, error)
	}{
		{"Manager.Cancel", func(m *Manager, id string) (int, error) { return m.Cancel(context.Background(), id) }},
		{"Owner.Cancel", func(m *Manager, id string) (int, error) { return m.Owner("a").Cancel(context.Background(), id) }},
		{"Owner.CancelTree", func(m *Manager, id string) (int, error) {
			return m.Owner("a").CancelTree(context.Background(), id)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
				var log startLog
				rel0, rel1, rel2 := gate(t), gate(t), gate(t)
				id0 := spawnFor(t, m, "a", gated(&log, "r0", rel0))
				id1 := spawnFor(t, m, "a", gated(&log, "q1", rel1), WithName("q1"))
				id2 := spawnFor(t, m, "a", gated(&log, "q2", rel2))

				n, err := tc.cancel(m, id1)
				if err != nil || n != 1 {
					t.Fatalf("cancel queued: (%d, %v), want (1, nil)", n, err)
				}
				meta := waitStatus(t, m, id1, bgtype.StatusCanceled)
				if meta.Error != ErrCanceled.Error() || !meta.StartedAt.IsZero() || meta.FinishedAt.IsZero() {
					t.Fatalf("cancelled queued task: error %q started %v finished %v", meta.Error, meta.StartedAt, meta.FinishedAt)
				}
				if stored := getTask(t, m, id1); stored.Status != bgtype.StatusCanceled || !stored.StartedAt.IsZero() {
					t.Fatalf("stored: status %q started %v, want cancelled, never started", stored.Status, stored.StartedAt)
				}
				if got, want := drainKindIDs(t, m, "a"), []kindID{{bgtype.EventCanceled, id1}}; !slices.Equal(got, want) {
					t.Fatalf("events %v, want %v", got, want)
				}
				if n, err := tc.cancel(m, id1); err != nil || n != 0 {
					t.Fatalf("second cancel: (%d, %v), want (0, nil)", n, err)
				}
				// Its name is free again, and it never took a slot.
				if _, err := m.Owner("a").Spawn(t.Context(), gated(&log, "q1again", rel2), WithName("q1")); err != nil {
					t.Fatalf("reusing the cancelled task's name: %v", err)
				}
				close(rel0)
				waitStatus(t, m, id0, bgtype.StatusCompleted)
				synctest.Wait()
				if got := log.get(); !slices.Equal(got, []string{"r0", "q2"}) {
					t.Fatalf("started %v, want [r0 q2]: the cancelled task must not run", got)
				}
				close(rel1)
				close(rel2)
				waitStatus(t, m, id2, bgtype.StatusCompleted)
				shutdownManager(t, m)
				if got := log.get(); slices.Contains(got, "q1") {
					t.Fatalf("started %v: the cancelled queued task ran", got)
				}
			})
		})
	}
}

func TestLimitPerOwnerDoesNotBlockOtherOwners(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithLimits(Limits{MaxConcurrentPerOwner: 1, QueueWhenFull: true}))
		var log startLog
		relA0, relA1, relB0 := gate(t), gate(t), gate(t)
		a0 := spawnFor(t, m, "a", gated(&log, "a0", relA0))
		a1 := spawnFor(t, m, "a", gated(&log, "a1", relA1))
		b0 := spawnFor(t, m, "b", gated(&log, "b0", relB0))
		synctest.Wait()
		for id, want := range map[string]bgtype.Status{a0: bgtype.StatusRunning, a1: bgtype.StatusQueued, b0: bgtype.StatusRunning} {
			if got := getTask(t, m, id).Status; got != want {
				t.Fatalf("%s: status %q, want %q", id, got, want)
			}
		}
		if got := sortedPrefix(log.get(), 2); !slices.Equal(got, []string{"a0", "b0"}) {
			t.Fatalf("started %v, want [a0 b0]", got)
		}
		close(relB0) // b's slot frees: a1 must still wait for a's
		waitStatus(t, m, b0, bgtype.StatusCompleted)
		synctest.Wait()
		if got := getTask(t, m, a1).Status; got != bgtype.StatusQueued {
			t.Fatalf("a1 after b0 ended: status %q, want queued", got)
		}
		close(relA0)
		waitStatus(t, m, a0, bgtype.StatusCompleted)
		synctest.Wait()
		if got := sortedPrefix(log.get(), 2); !slices.Equal(got, []string{"a0", "b0", "a1"}) {
			t.Fatalf("started %v, want [a0 b0 a1]", got)
		}
		close(relA1)
		waitStatus(t, m, a1, bgtype.StatusCompleted)
		shutdownManager(t, m)
	})
}

// A queued task whose owner is still at its limit does not hold up a later
// queued task of another owner.
func TestLimitQueueSkipsOwnerAtLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 2, MaxConcurrentPerOwner: 1, QueueWhenFull: true}))
		var log startLog
		rel := map[string]chan struct{}{}
		ids := map[string]string{}
		for _, s := range []struct{ owner, name string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"c", "c1"}, {"b", "b2"}} {
			rel[s.name] = gate(t)
			ids[s.name] = spawnFor(t, m, s.owner, gated(&log, s.name, rel[s.name]))
		}
		check := func(wantStarted []string, want map[string]bgtype.Status) {
			t.Helper()
			synctest.Wait()
			if got := sortedPrefix(log.get(), 2); !slices.Equal(got, wantStarted) {
				t.Fatalf("started %v, want %v", got, wantStarted)
			}
			for name, st := range want {
				if got := getTask(t, m, ids[name]).Status; got != st {
					t.Fatalf("%s: status %q, want %q", name, got, st)
				}
			}
		}
		check([]string{"a1", "b1"}, map[string]bgtype.Status{"a2": bgtype.StatusQueued, "c1": bgtype.StatusQueued, "b2": bgtype.StatusQueued})

		// b1 ends: a2 (owner a still at its limit) is skipped, c1 starts,
		// and b2 waits for the global slot c1 took.
		close(rel["b1"])
		waitStatus(t, m, ids["b1"], bgtype.StatusCompleted)
		check([]string{"a1", "b1", "c1"}, map[string]bgtype.Status{"a2": bgtype.StatusQueued, "c1": bgtype.StatusRunning, "b2": bgtype.StatusQueued})

		close(rel["a1"])
		waitStatus(t, m, ids["a1"], bgtype.StatusCompleted)
		check([]string{"a1", "b1", "c1", "a2"}, map[string]bgtype.Status{"a2": bgtype.StatusRunning, "b2": bgtype.StatusQueued})

		close(rel["c1"])
		waitStatus(t, m, ids["c1"], bgtype.StatusCompleted)
		check([]string{"a1", "b1", "c1", "a2", "b2"}, map[string]bgtype.Status{"b2": bgtype.StatusRunning})

		close(rel["a2"])
		close(rel["b2"])
		waitStatus(t, m, ids["a2"], bgtype.StatusCompleted)
		waitStatus(t, m, ids["b2"], bgtype.StatusCompleted)
		shutdownManager(t, m)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.running != 0 || len(m.queue) != 0 {
			t.Fatalf("after shutdown: running %d, queue %d, want 0 and 0", m.running, len(m.queue))
		}
	})
}

func TestLimitShutdownCancelsQueued(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
		var log startLog
		running := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			log.add("r")
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
		never := gate(t)
		q1 := spawnFor(t, m, "a", gated(&log, "q1", never))
		q2 := spawnFor(t, m, "b", gated(&log, "q2", never))
		synctest.Wait()

		start := time.Now()
		shutdownManager(t, m)
		if d := time.Since(start); d != 0 {
			t.Fatalf("Shutdown took %v of fake time, want 0", d)
		}
		if got := log.get(); !slices.Equal(got, []string{"r"}) {
			t.Fatalf("started %v, want [r]: queued tasks must not run", got)
		}
		for _, id := range []string{running, q1, q2} {
			meta := getTask(t, m, id)
			if meta.Status != bgtype.StatusCanceled || meta.Error != ErrShutdown.Error() {
				t.Fatalf("%s: status %q error %q, want cancelled %q", id, meta.Status, meta.Error, ErrShutdown.Error())
			}
			if id != running && !meta.StartedAt.IsZero() {
				t.Fatalf("%s: queued task has a start stamp %v", id, meta.StartedAt)
			}
		}
		gotA := drainKindIDs(t, m, "a")
		slices.SortFunc(gotA, func(x, y kindID) int { return cmp.Compare(x.ID, y.ID) })
		wantA := []kindID{{bgtype.EventCanceled, running}, {bgtype.EventCanceled, q1}}
		slices.SortFunc(wantA, func(x, y kindID) int { return cmp.Compare(x.ID, y.ID) })
		if !slices.Equal(gotA, wantA) {
			t.Fatalf("owner a events %v, want %v", gotA, wantA)
		}
		if got, want := drainKindIDs(t, m, "b"), []kindID{{bgtype.EventCanceled, q2}}; !slices.Equal(got, want) {
			t.Fatalf("owner b events %v, want %v", got, want)
		}
	})
}

func TestLimitPanickingTaskFreesSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 1, MaxConcurrentPerOwner: 1, QueueWhenFull: true}))
		var log startLog
		boom := gate(t)
		p := spawnFor(t, m, "a", func(ctx context.Context, _ *Task) (any, error) {
			log.add("p")
			<-boom
			panic("boom")
		})
		rel := gate(t)
		q := spawnFor(t, m, "a", gated(&log, "q", rel))
		synctest.Wait()
		if got := getTask(t, m, q).Status; got != bgtype.StatusQueued {
			t.Fatalf("q: status %q, want queued", got)
		}
		close(boom)
		meta := waitStatus(t, m, p, bgtype.StatusFailed)
		if meta.Error != "panic: boom" || meta.Stack == "" {
			t.Fatalf("panicked task: error %q, stack %d bytes; want %q and a stack", meta.Error, len(meta.Stack), "panic: boom")
		}
		synctest.Wait()
		if got := log.get(); !slices.Equal(got, []string{"p", "q"}) {
			t.Fatalf("started %v, want [p q]", got)
		}
		if got := getTask(t, m, q).Status; got != bgtype.StatusRunning {
			t.Fatalf("q after the panic: status %q, want running", got)
		}
		close(rel)
		waitStatus(t, m, q, bgtype.StatusCompleted)
		if got, want := drainKindIDs(t, m, "a"), []kindID{{bgtype.EventFailed, p}, {bgtype.EventCompleted, q}}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		shutdownManager(t, m)
	})
}
