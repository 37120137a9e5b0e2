package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Store is implemented by MemoryStore.
var _ store.Store = (*Store)(nil)

func mustCommit(t testing.TB, s store.Store, owner string, actions ...store.Action) {
	t.Helper()
	if err := s.Commit(context.Background(), owner, actions...); err != nil {
		t.Fatalf("Commit(%s): %v", owner, err)
	}
}

func mustLoad(t testing.TB, s store.Store, owner string) map[string]bgtype.TaskMeta {
	t.Helper()
	snap, err := s.Load(context.Background(), owner)
	if err != nil {
		t.Fatalf("Load(%s): %v", owner, err)
	}
	if snap.Tasks == nil {
		t.Fatalf("Load(%s): nil Tasks map", owner)
	}
	return snap.Tasks
}

func ids(tasks map[string]bgtype.TaskMeta) []string {
	out := make([]string, 0, len(tasks))
	for id := range tasks {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// finished returns a terminal record finished at at.
func finished(id, owner string, st bgtype.Status, at time.Time) bgtype.TaskMeta {
	return bgtype.TaskMeta{ID: id, Owner: owner, Status: st, FinishedAt: at}
}

func TestMemoryStoreCommitLoadGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New()
	if got := mustLoad(t, s, "o"); len(got) != 0 {
		t.Fatalf("empty store: %+v", got)
	}
	run := bgtype.TaskMeta{ID: "task_a", Owner: "o", Name: "n", Status: bgtype.StatusRunning, CreatedAt: rt0, StartedAt: rt1}
	mustCommit(t, s, "o", store.UpsertAction(run), store.UpsertAction(rmeta("task_b", "o", bgtype.StatusQueued)))
	mustCommit(t, s, "p", store.UpsertAction(rmeta("task_c", "p", bgtype.StatusRunning)))
	got, err := s.Get(ctx, "task_a")
	if err != nil || !reflect.DeepEqual(got, run) {
		t.Fatalf("Get: got %+v %v, want %+v", got, err, run)
	}
	if want := snapOf(run, rmeta("task_b", "o", bgtype.StatusQueued)); !reflect.DeepEqual(mustLoad(t, s, "o"), want) {
		t.Fatalf("Load(o): got %+v", mustLoad(t, s, "o"))
	}
	if want := snapOf(rmeta("task_c", "p", bgtype.StatusRunning)); !reflect.DeepEqual(mustLoad(t, s, "p"), want) {
		t.Fatalf("Load(p): got %+v", mustLoad(t, s, "p"))
	}
	// Updates go through the reducer.
	done := with(run, func(m *bgtype.TaskMeta) {
		m.Status, m.Result, m.FinishedAt = bgtype.StatusCompleted, json.RawMessage(`{"ok":true}`), time.Now().UTC()
	})
	mustCommit(t, s, "o", store.UpsertAction(done))
	mustCommit(t, s, "o", store.UpsertAction(with(done, func(m *bgtype.TaskMeta) { m.Status, m.Error = bgtype.StatusFailed, "late" }))) // dropped, no error
	if got, err := s.Get(ctx, "task_a"); err != nil || !reflect.DeepEqual(got, done) {
		t.Fatalf("Get after terminal: got %+v %v, want %+v", got, err, done)
	}
	// An empty commit is fine.
	mustCommit(t, s, "o")
}

func TestMemoryStoreGetUnknown(t *testing.T) {
	t.Parallel()
	s := New()
	mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)))
	_, err := s.Get(context.Background(), "task_nope")
	if !errors.Is(err, bgtype.ErrNotFound) || err.Error() != "bgtask: task not found: task_nope" {
		t.Fatalf("got %v, want ErrNotFound naming the id", err)
	}
	// A removed record is not found either.
	mustCommit(t, s, "o", store.UpsertAction(finished("task_b", "o", bgtype.StatusCanceled, time.Now())), store.RemoveAction("task_b"))
	if _, err := s.Get(context.Background(), "task_b"); !errors.Is(err, bgtype.ErrNotFound) {
		t.Fatalf("removed: got %v, want ErrNotFound", err)
	}
}

func TestMemoryStoreCommitValidatesFirst(t *testing.T) {
	t.Parallel()
	valid := rmeta("task_new", "o", bgtype.StatusRunning)
	tests := []struct {
		name    string
		actions []store.Action
		text    string
		also    error
	}{
		{"unknown op", []store.Action{store.UpsertAction(valid), {Op: "explode"}},
			`bgtask: invalid state action: unknown op "explode"`, nil},
		{"empty op", []store.Action{store.UpsertAction(valid), {}},
			`bgtask: invalid state action: unknown op ""`, nil},
		{"task of another owner", []store.Action{store.UpsertAction(valid), store.UpsertAction(rmeta("task_x", "p", bgtype.StatusRunning))},
			`bgtask: invalid state action: task task_x belongs to owner "p", not "o"`, nil},
		{"replace_all with a task of another owner", []store.Action{store.ReplaceAllAction(valid, rmeta("task_x", "p", bgtype.StatusRunning))},
			`bgtask: invalid state action: task task_x belongs to owner "p", not "o"`, nil},
		{"upsert with no task", []store.Action{store.UpsertAction(valid), {Op: store.OpUpsert}},
			"bgtask: invalid state action: upsert carries 0 tasks, want 1", nil},
		{"upsert with two tasks", []store.Action{{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{valid, rmeta("task_y", "o", bgtype.StatusRunning)}}},
			"bgtask: invalid state action: upsert carries 2 tasks, want 1", nil},
		{"task without id", []store.Action{store.UpsertAction(valid), store.UpsertAction(rmeta("", "o", bgtype.StatusRunning))},
			"bgtask: invalid state action: bgtask: corrupt task metadata: task without id", bgtype.ErrCorrupt},
		{"task with unknown status", []store.Action{store.UpsertAction(valid), store.UpsertAction(rmeta("task_z", "o", "zombie"))},
			`bgtask: invalid state action: bgtask: corrupt task metadata: task task_z: unknown status "zombie"`, bgtype.ErrCorrupt},
		{"task with invalid result", []store.Action{store.UpsertAction(valid), store.UpsertAction(with(rmeta("task_z", "o", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Result = json.RawMessage("{") }))},
			"bgtask: invalid state action: bgtask: corrupt task metadata: task task_z: result is not valid JSON", bgtype.ErrCorrupt},
		{"remove is validated with the rest", []store.Action{store.RemoveAction("task_done"), {Op: "explode"}},
			`bgtask: invalid state action: unknown op "explode"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			before := snapOf(rmeta("task_a", "o", bgtype.StatusRunning), finished("task_done", "o", bgtype.StatusCompleted, time.Now().UTC()))
			mustCommit(t, s, "o", store.UpsertAction(before["task_a"]), store.UpsertAction(before["task_done"]))
			err := s.Commit(context.Background(), "o", tc.actions...)
			if !errors.Is(err, store.ErrInvalidAction) {
				t.Fatalf("got %v, want ErrInvalidAction", err)
			}
			if err.Error() != tc.text {
				t.Fatalf("text: got %q, want %q", err, tc.text)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Fatalf("got %v, want it to match %v too", err, tc.also)
			}
			if got := mustLoad(t, s, "o"); !reflect.DeepEqual(got, before) {
				t.Fatalf("store changed by a refused commit: %v", ids(got))
			}
			if got := mustLoad(t, s, "p"); len(got) != 0 {
				t.Fatalf("owner p has %v", ids(got))
			}
		})
	}
	s := New()
	if err := s.Commit(context.Background(), "", store.UpsertAction(rmeta("task_a", "", bgtype.StatusRunning))); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Fatalf("empty owner: got %v, want ErrInvalidArgument (blank owner)", err)
	}
}

func TestMemoryStoreIDNeverMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New()
	orig := rmeta("task_a", "o1", bgtype.StatusRunning)
	mustCommit(t, s, "o1", store.UpsertAction(orig))
	// Another owner claims the id: dropped without error, by every op.
	mustCommit(t, s, "o2", store.UpsertAction(finished("task_a", "o2", bgtype.StatusCompleted, time.Now().UTC())))
	mustCommit(t, s, "o2", store.ReplaceAllAction(rmeta("task_a", "o2", bgtype.StatusRunning), rmeta("task_b", "o2", bgtype.StatusRunning)))
	mustCommit(t, s, "o1", store.UpsertAction(finished("task_a", "o1", bgtype.StatusFailed, time.Now().UTC())))
	mustCommit(t, s, "o2", store.RemoveAction("task_a"))
	got, err := s.Get(ctx, "task_a")
	if err != nil || got.Owner != "o1" || got.Status != bgtype.StatusFailed {
		t.Fatalf("Get: got %+v %v, want o1's failed record", got, err)
	}
	if got := ids(mustLoad(t, s, "o2")); !reflect.DeepEqual(got, []string{"task_b"}) {
		t.Fatalf("o2 holds %v, want [task_b]", got)
	}
	if got := ids(mustLoad(t, s, "o1")); !reflect.DeepEqual(got, []string{"task_a"}) {
		t.Fatalf("o1 holds %v, want [task_a]", got)
	}
	// Once o1 forgets it, the id is free again.
	mustCommit(t, s, "o1", store.RemoveAction("task_a"))
	mustCommit(t, s, "o2", store.UpsertAction(rmeta("task_a", "o2", bgtype.StatusQueued)))
	if got, err := s.Get(ctx, "task_a"); err != nil || got.Owner != "o2" {
		t.Fatalf("after removal: got %+v %v", got, err)
	}
}

func TestMemoryStoreLoadIsACopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New()
	res := []byte(`{"n":1}`)
	rec := finished("task_a", "o", bgtype.StatusCompleted, time.Now().UTC())
	rec.Result = res
	mustCommit(t, s, "o", store.UpsertAction(rec), store.UpsertAction(rmeta("task_b", "o", bgtype.StatusRunning)))
	res[5] = '7' // the caller's buffer is not kept
	want := mustLoad(t, s, "o")
	if string(want["task_a"].Result) != `{"n":1}` {
		t.Fatalf("store kept the caller's result buffer: %s", want["task_a"].Result)
	}

	snap, err := s.Load(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	snap.Tasks["task_a"].Result[5] = '9'
	delete(snap.Tasks, "task_b")
	snap.Tasks["task_c"] = rmeta("task_c", "o", bgtype.StatusRunning)
	b := snap.Tasks["task_a"]
	b.Status = bgtype.StatusRunning
	snap.Tasks["task_a"] = b
	store.Apply(&snap, store.RemoveAction("task_a"))
	if got := mustLoad(t, s, "o"); !reflect.DeepEqual(got, want) {
		t.Fatalf("store changed through a loaded snapshot: %+v", got)
	}
	g, err := s.Get(ctx, "task_a")
	if err != nil {
		t.Fatal(err)
	}
	g.Result[5] = '8'
	if got := mustLoad(t, s, "o"); !reflect.DeepEqual(got, want) {
		t.Fatalf("store changed through Get's record")
	}
	// Loads of an unknown owner are independent empty maps.
	e1, _ := s.Load(ctx, "nobody")
	e1.Tasks["x"] = bgtype.TaskMeta{}
	if got := mustLoad(t, s, "nobody"); len(got) != 0 {
		t.Fatalf("empty snapshot shared: %+v", got)
	}
}

func TestMemoryStoreRetainPerOwner(t *testing.T) {
	t.Parallel()
	base := time.Now().UTC().Add(-time.Minute)
	s := New(WithRetainPerOwner(2))
	mustCommit(t, s, "o", store.UpsertAction(rmeta("task_live", "o", bgtype.StatusRunning)), store.UpsertAction(rmeta("task_q", "o", bgtype.StatusQueued)))
	for i := range 5 {
		id := fmt.Sprintf("task_%d", i)
		mustCommit(t, s, "o", store.UpsertAction(rmeta(id, "o", bgtype.StatusRunning)))
		mustCommit(t, s, "o", store.UpsertAction(finished(id, "o", bgtype.StatusCompleted, base.Add(time.Duration(i)*time.Second))))
	}
	mustCommit(t, s, "p", store.UpsertAction(finished("task_p0", "p", bgtype.StatusFailed, base)), store.UpsertAction(finished("task_p1", "p", bgtype.StatusFailed, base)))
	if got, want := ids(mustLoad(t, s, "o")), []string{"task_3", "task_4", "task_live", "task_q"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("o holds %v, want %v", got, want)
	}
	if got, want := ids(mustLoad(t, s, "p")), []string{"task_p0", "task_p1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("p holds %v, want %v", got, want)
	}
	if _, err := s.Get(context.Background(), "task_0"); !errors.Is(err, bgtype.ErrNotFound) {
		t.Fatalf("forgotten record: got %v, want ErrNotFound", err)
	}
	// Ending the live tasks pushes out older terminal records, never the other way.
	mustCommit(t, s, "o", store.UpsertAction(finished("task_live", "o", bgtype.StatusCanceled, base.Add(10*time.Second))))
	if got, want := ids(mustLoad(t, s, "o")), []string{"task_4", "task_live", "task_q"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("o holds %v, want %v", got, want)
	}
	// A terminal record merged by ReplaceAll is still counted once.
	mustCommit(t, s, "o", store.ReplaceAllAction(mustLoad(t, s, "o")["task_4"], rmeta("task_q", "o", bgtype.StatusQueued), finished("task_r", "o", bgtype.StatusFailed, base.Add(20*time.Second))))
	if got, want := ids(mustLoad(t, s, "o")), []string{"task_4", "task_q", "task_r"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after ReplaceAll o holds %v, want %v", got, want)
	}
	mustCommit(t, s, "o", store.UpsertAction(finished("task_s", "o", bgtype.StatusFailed, base.Add(30*time.Second))))
	if got, want := ids(mustLoad(t, s, "o")), []string{"task_q", "task_r", "task_s"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after one more o holds %v, want %v", got, want)
	}
}

func TestMemoryStoreRetainNone(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -3} {
		s := New(WithRetainPerOwner(n))
		now := time.Now().UTC()
		mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)), store.UpsertAction(rmeta("task_b", "o", bgtype.StatusQueued)))
		mustCommit(t, s, "o", store.UpsertAction(finished("task_a", "o", bgtype.StatusCompleted, now)))
		if got, want := ids(mustLoad(t, s, "o")), []string{"task_b"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("WithRetainPerOwner(%d): o holds %v, want %v", n, got, want)
		}
		// The id is free again: a new record may take it.
		mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)))
		if got, err := s.Get(context.Background(), "task_a"); err != nil || got.Status != bgtype.StatusRunning {
			t.Fatalf("WithRetainPerOwner(%d): %+v %v", n, got, err)
		}
	}
}

func TestMemoryStoreRetainFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithRetainFor(time.Hour))
		mustCommit(t, s, "p", store.UpsertAction(finished("task_p_old", "p", bgtype.StatusCompleted, time.Now())))
		mustCommit(t, s, "o", store.UpsertAction(finished("task_old", "o", bgtype.StatusCompleted, time.Now())))
		<-time.After(50 * time.Minute)
		mustCommit(t, s, "o",
			store.UpsertAction(finished("task_recent", "o", bgtype.StatusCompleted, time.Now())),
			store.UpsertAction(bgtype.TaskMeta{ID: "task_live", Owner: "o", Status: bgtype.StatusRunning, StartedAt: time.Now().Add(-5 * time.Hour)}),
		)
		<-time.After(10 * time.Minute) // exactly one hour after task_old: not older than the limit yet
		mustCommit(t, s, "q", store.UpsertAction(rmeta("task_q", "q", bgtype.StatusRunning)))
		if got, want := ids(mustLoad(t, s, "o")), []string{"task_live", "task_old", "task_recent"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("at 1h o holds %v, want %v", got, want)
		}
		<-time.After(time.Nanosecond)
		mustCommit(t, s, "q", store.UpsertAction(finished("task_q2", "q", bgtype.StatusCompleted, time.Now()))) // a commit that ends a task checks ages
		if got, want := ids(mustLoad(t, s, "o")), []string{"task_live", "task_recent"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("o holds %v, want %v", got, want)
		}
		// Another owner's commit ages records of every owner.
		if got := ids(mustLoad(t, s, "p")); len(got) != 0 {
			t.Fatalf("p holds %v, want nothing", got)
		}
		// WithRetainFor(0) disables the age limit.
		s2 := New(WithRetainFor(0))
		mustCommit(t, s2, "o", store.UpsertAction(finished("task_old", "o", bgtype.StatusCompleted, time.Now())))
		<-time.After(1000 * time.Hour)
		mustCommit(t, s2, "o", store.UpsertAction(rmeta("task_b", "o", bgtype.StatusRunning)))
		if got := ids(mustLoad(t, s2, "o")); !reflect.DeepEqual(got, []string{"task_b", "task_old"}) {
			t.Fatalf("WithRetainFor(0): o holds %v", got)
		}
	})
}

// WithRetainPerOwner drops the records first committed terminal, whatever their
// finish times say (a restore may bring records out of finish order).
func TestMemoryStoreRetainOrderIsCommitOrder(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	s := New(WithRetainPerOwner(1), WithRetainFor(0))
	mustCommit(t, s, "o", store.UpsertAction(finished("task_late", "o", bgtype.StatusCompleted, now)))
	mustCommit(t, s, "o", store.UpsertAction(finished("task_early", "o", bgtype.StatusCompleted, now.Add(-time.Second))))
	if got := ids(mustLoad(t, s, "o")); !reflect.DeepEqual(got, []string{"task_early"}) {
		t.Fatalf("kept %v, want [task_early] (committed last)", got)
	}
}

// A terminal record without FinishedAt (a host's own record, or a restored
// one, since finished_at is optional in JSON) is a valid record: Commit
// accepts it, so a Get right after should find it.
func TestMemoryStoreTerminalWithoutFinishedAt(t *testing.T) {
	t.Parallel()
	s := New() // default WithRetainFor 24h
	mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)))
	mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusCompleted)))
	if _, err := s.Get(context.Background(), "task_a"); err != nil {
		t.Fatalf("a terminal record without FinishedAt was dropped by the commit that stored it: %v", err)
	}
}

// Eight committers move distinct ids and shared ids from running to a
// terminal status while readers look on; the reducer's invariants hold.
func TestMemoryStoreConcurrentCommitters(t *testing.T) {
	t.Parallel()
	const workers, perWorker, shared = 8, 40, 10
	s := New()
	ctx := context.Background()
	status := func(w int) bgtype.Status {
		return []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled}[w%3]
	}
	owner := func(w int) string { return fmt.Sprintf("o%d", w%2) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Go(func() {
			seen := map[string]bgtype.TaskMeta{} // terminal records seen
			for range 300 {                      // bounded, so readers do not starve the writers on 2 cores
				select {
				case <-stop:
					return
				default:
				}
				for k := range shared {
					id := fmt.Sprintf("task_shared_%d", k)
					m, err := s.Get(ctx, id)
					if err != nil {
						continue
					}
					if old, ok := seen[id]; ok && !reflect.DeepEqual(old, m) {
						t.Errorf("reader %d: terminal %s changed: %+v -> %+v", r, id, old, m)
						return
					}
					if m.Status.IsTerminal() {
						seen[id] = m
					}
				}
				if _, err := s.Load(ctx, owner(r)); err != nil {
					t.Errorf("Load: %v", err)
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			o := owner(w)
			for i := range perWorker {
				id := fmt.Sprintf("task_w%d_%d", w, i)
				if err := s.Commit(ctx, o, store.UpsertAction(bgtype.TaskMeta{ID: id, Owner: o, Status: bgtype.StatusRunning, Attempt: 1, StartedAt: rt0})); err != nil {
					t.Errorf("Commit: %v", err)
				}
				fin := bgtype.TaskMeta{ID: id, Owner: o, Status: status(w), Attempt: 1, FinishedAt: time.Now().UTC(),
					Result: json.RawMessage(fmt.Sprintf(`{"w":%d}`, w))}
				if err := s.Commit(ctx, o, store.UpsertAction(fin)); err != nil {
					t.Errorf("Commit: %v", err)
				}
			}
			// Shared ids all belong to o0; workers of o1 must be refused by validation.
			for k := range shared {
				id := fmt.Sprintf("task_shared_%d", k)
				run := bgtype.TaskMeta{ID: id, Owner: "o0", Status: bgtype.StatusRunning, Attempt: int64(w % 3)}
				fin := bgtype.TaskMeta{ID: id, Owner: "o0", Status: status(w), Attempt: int64(w % 3), FinishedAt: time.Now().UTC(),
					Result: json.RawMessage(fmt.Sprintf(`{"w":%d}`, w))}
				err := s.Commit(ctx, o, store.UpsertAction(run), store.UpsertAction(fin))
				if o == "o0" && err != nil {
					t.Errorf("Commit shared: %v", err)
				}
				if o == "o1" && !errors.Is(err, store.ErrInvalidAction) {
					t.Errorf("Commit shared from o1: got %v, want ErrInvalidAction", err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()

	all := map[string]bgtype.TaskMeta{}
	for _, o := range []string{"o0", "o1"} {
		for id, m := range mustLoad(t, s, o) {
			if m.Owner != o {
				t.Fatalf("%s loaded under %s: %+v", id, o, m)
			}
			all[id] = m
		}
	}
	if len(all) != workers*perWorker+shared {
		t.Fatalf("%d records, want %d", len(all), workers*perWorker+shared)
	}
	for w := range workers {
		for i := range perWorker {
			id := fmt.Sprintf("task_w%d_%d", w, i)
			m := all[id]
			if m.Status != status(w) || string(m.Result) != fmt.Sprintf(`{"w":%d}`, w) || !m.StartedAt.Equal(rt0) || m.FinishedAt.IsZero() {
				t.Fatalf("%s: %+v", id, m)
			}
		}
	}
	for k := range shared {
		id := fmt.Sprintf("task_shared_%d", k)
		m := all[id]
		var res struct{ W int }
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatalf("%s: %+v", id, m)
		}
		// The first terminal write wins whole: status, result and attempt
		// come from the same worker, one of o0's.
		if res.W%2 != 0 || m.Status != status(res.W) || m.Attempt != int64(res.W%3) || m.Owner != "o0" {
			t.Fatalf("%s: mixed record %+v", id, m)
		}
		got, err := s.Get(ctx, id)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("Get(%s) = %+v %v, Load has %+v", id, got, err, m)
		}
	}
}

func TestMemoryStoreContextDone(t *testing.T) {
	t.Parallel()
	s := New()
	mustCommit(t, s, "o", store.UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Commit(ctx, "o", store.UpsertAction(finished("task_a", "o", bgtype.StatusCompleted, time.Now()))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit: got %v, want Canceled", err)
	}
	if _, err := s.Load(ctx, "o"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load: got %v, want Canceled", err)
	}
	if _, err := s.Get(ctx, "task_a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get: got %v, want Canceled", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer dcancel()
	if err := s.Commit(dctx, "o", store.UpsertAction(rmeta("task_b", "o", bgtype.StatusRunning))); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Commit past deadline: got %v", err)
	}
	if got, err := s.Get(context.Background(), "task_a"); err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("a cancelled commit changed the store: %+v %v", got, err)
	}
	if got := ids(mustLoad(t, s, "o")); !reflect.DeepEqual(got, []string{"task_a"}) {
		t.Fatalf("o holds %v", got)
	}
}

// The age limit counts from the commit that made a record terminal, by the
// store's clock: a record restored with an old finish time is kept for the
// full period, then dropped like any other.
func TestMemoryStoreRetainForCountsFromCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithRetainFor(time.Hour))
		mustCommit(t, s, "o", store.UpsertAction(finished("task_old", "o", bgtype.StatusCompleted, time.Now().Add(-3*time.Hour))))
		<-time.After(30 * time.Minute)
		mustCommit(t, s, "o", store.UpsertAction(finished("task_recent", "o", bgtype.StatusCompleted, time.Now())))
		mustCommit(t, s, "o", store.UpsertAction(rmeta("task_live", "o", bgtype.StatusRunning)))
		if got := ids(mustLoad(t, s, "o")); !reflect.DeepEqual(got, []string{"task_live", "task_old", "task_recent"}) {
			t.Fatalf("after 30 min o holds %v", got)
		}
		<-time.After(31 * time.Minute)
		mustCommit(t, s, "p", store.UpsertAction(finished("task_p", "p", bgtype.StatusCompleted, time.Now()))) // a commit that ends a task checks ages
		if got := ids(mustLoad(t, s, "o")); !reflect.DeepEqual(got, []string{"task_live", "task_recent"}) {
			t.Fatalf("after 61 min o holds %v", got)
		}
	})
}
