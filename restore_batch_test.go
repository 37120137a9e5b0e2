package bgtask

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// staleRecords commits n running records of owner, left by instance
// "gone", created one millisecond apart, and returns their ids in creation
// order. The ids sort against the creation order, so that an order by id
// would show.
func staleRecords(t *testing.T, st store.Store, owner string, n int) []string {
	t.Helper()
	at := clock.Now().Add(-time.Hour)
	ids := make([]string, n)
	var actions []store.Action
	for i := range n {
		ids[i] = fmt.Sprintf("task_%06d", n-i)
		actions = append(actions, store.UpsertAction(bgtype.TaskMeta{ID: ids[i], Owner: owner, Type: bgtype.TypeTask, Status: bgtype.StatusRunning,
			CreatedAt: at.Add(time.Duration(i) * time.Millisecond), Instance: "gone", Attempt: 1}))
	}
	if err := st.Commit(t.Context(), owner, actions...); err != nil {
		t.Fatal(err)
	}
	return ids
}

// batchStore counts the Commit calls that carry interrupted records and
// can fail one of them, or run a write of its own just before one.
type batchStore struct {
	store.Store
	mu      sync.Mutex
	batches []int // records per Commit of interrupted records
	failAt  int   // 1-based: that Commit fails
	before  func(n int) error
}

var errBatch = errors.New("injected batch failure")

func (s *batchStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if len(actions) == 0 || len(actions[0].Tasks) == 0 || actions[0].Tasks[0].Status != bgtype.StatusInterrupted {
		return s.Store.Commit(ctx, owner, actions...)
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(actions))
	n := len(s.batches)
	s.mu.Unlock()
	if n == s.failAt {
		return errBatch
	}
	if s.before != nil {
		if err := s.before(n); err != nil {
			return err
		}
	}
	return s.Store.Commit(ctx, owner, actions...)
}

func restoredIDs(ms []bgtype.TaskMeta) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// Restore commits the stale records in batches of 500, one Commit each,
// and still reports every one, in creation order, with one event each.
func TestRestoreCommitsInBatches(t *testing.T) {
	st := &batchStore{Store: memstore.New(memstore.WithRetainPerOwner(2000))}
	ids := staleRecords(t, st, "a", 1203)
	var seen []string
	m := newTestManager(t, WithStore(st), WithObserver(func(tr Transition) {
		if tr.From == bgtype.StatusRunning && tr.To == bgtype.StatusInterrupted {
			seen = append(seen, tr.Task.ID)
		}
	}))
	got, err := m.Restore(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restoredIDs(got), ids) {
		t.Fatalf("Restore returned %d records, want all %d in creation order", len(got), len(ids))
	}
	if want := []int{500, 500, 203}; !slices.Equal(st.batches, want) {
		t.Fatalf("%d Commits of interrupted records (the first carrying %d), want %v", len(st.batches), st.batches[0], want)
	}
	var evs []string
	for _, ev := range drainOwner(t, m.Owner("a")) {
		if ev.Kind != bgtype.EventInterrupted {
			t.Fatalf("event %+v, want interrupted", ev)
		}
		evs = append(evs, ev.TaskID)
	}
	if !slices.Equal(evs, ids) || !slices.Equal(seen, ids) {
		t.Fatalf("%d events and %d transitions, want %d each, in creation order", len(evs), len(seen), len(ids))
	}
	for _, meta := range got {
		if meta.Status != bgtype.StatusInterrupted || meta.Attempt != 2 || meta.ErrorKind != bgtype.KindInterrupted {
			t.Fatalf("restored %+v: want interrupted at attempt 2", meta)
		}
	}
	if n := m.Stats().Interrupted; n != 1203 {
		t.Fatalf("Stats().Interrupted = %d, want 1203", n)
	}
}

// A record that ends (its own runner's write) after Restore read it but
// before the batch is committed keeps its own status and gets no
// interrupted event; the rest of the batch is restored.
func TestRestoreBatchRecordEndedMeanwhile(t *testing.T) {
	st := &batchStore{Store: memstore.New()}
	ids := staleRecords(t, st, "a", 5)
	st.before = func(int) error {
		done := bgtype.TaskMeta{ID: ids[2], Owner: "a", Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, Instance: "gone", Attempt: 1}
		return st.Store.Commit(t.Context(), "a", store.UpsertAction(done))
	}
	m := newTestManager(t, WithStore(st))
	got, err := m.Restore(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ids[0], ids[1], ids[3], ids[4]}
	if !slices.Equal(restoredIDs(got), want) {
		t.Fatalf("Restore returned %v, want %v", restoredIDs(got), want)
	}
	var evs []string
	for _, ev := range drainOwner(t, m.Owner("a")) {
		evs = append(evs, string(ev.Kind)+" "+ev.TaskID)
	}
	// The record that ended meanwhile was never taken by the owner's loop:
	// Restore announces it after the interrupted ones.
	if wantEvs := []string{"interrupted " + ids[0], "interrupted " + ids[1], "interrupted " + ids[3], "interrupted " + ids[4], "completed " + ids[2]}; !slices.Equal(evs, wantEvs) {
		t.Fatalf("events %v, want %v", evs, wantEvs)
	}
	if meta, err := m.Get(t.Context(), ids[2]); err != nil || meta.Status != bgtype.StatusCompleted || meta.Attempt != 1 {
		t.Fatalf("record that ended meanwhile: %q attempt %d, %v; want completed at attempt 1", meta.Status, meta.Attempt, err)
	}
}

// A failed batch fails Restore with the st's error; the batches
// committed before it stay interrupted with their events sent, and the
// failed one is left for the next Restore.
func TestRestoreFailedBatch(t *testing.T) {
	st := &batchStore{Store: memstore.New(memstore.WithRetainPerOwner(2000)), failAt: 2}
	ids := staleRecords(t, st, "a", 700)
	m := newTestManager(t, WithStore(st))
	got, err := m.Restore(t.Context(), "a")
	wantErr := fmt.Sprintf("bgtask: restore %s and 199 more: %v", ids[500], errBatch)
	if !errors.Is(err, errBatch) || err.Error() != wantErr {
		t.Fatalf("Restore error = %v, want %q", err, wantErr)
	}
	if !slices.Equal(restoredIDs(got), ids[:500]) {
		t.Fatalf("Restore returned %d records, want the first batch's 500", len(got))
	}
	if evs := drainOwner(t, m.Owner("a")); len(evs) != 500 || evs[0].TaskID != ids[0] || evs[499].TaskID != ids[499] {
		t.Fatalf("%d events, want the first batch's 500", len(evs))
	}
	if meta, _ := m.Get(t.Context(), ids[500]); meta.Status != bgtype.StatusRunning {
		t.Fatalf("record of the failed batch is %q, want running", meta.Status)
	}
	again, err := m.Restore(t.Context(), "a")
	if err != nil || !slices.Equal(restoredIDs(again), ids[500:]) {
		t.Fatalf("second Restore = %d records, %v; want the other 200", len(again), err)
	}
}

// A st that keeps fewer terminal records than a batch drops some of the
// interrupted records in the Commit that wrote them: they were still
// interrupted by this Restore, so they are reported, in creation order.
func TestRestoreRecordsDroppedByRetention(t *testing.T) {
	for _, keep := range []int{0, 2} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			st := memstore.New(memstore.WithRetainPerOwner(keep))
			ids := staleRecords(t, st, "a", 5)
			m := newTestManager(t, WithStore(st))
			got, err := m.Restore(t.Context(), "a")
			if err != nil || !slices.Equal(restoredIDs(got), ids) {
				t.Fatalf("Restore = %v, %v; want %v", restoredIDs(got), err, ids)
			}
			for _, meta := range got {
				if meta.Status != bgtype.StatusInterrupted || meta.Attempt != 2 {
					t.Fatalf("restored %+v: want interrupted at attempt 2", meta)
				}
			}
			if evs := drainOwner(t, m.Owner("a")); len(evs) != 5 || evs[0].TaskID != ids[0] || evs[4].TaskID != ids[4] {
				t.Fatalf("events %v, want one per record in creation order", evs)
			}
		})
	}
}

// pendingOwnerStore is a MemoryStore that implements PendingOwnerFinder and
// records the owners it lists and the PendingOwners calls.
type pendingOwnerStore struct {
	*memstore.Store
	mu    sync.Mutex
	loads []string
	asked [][]string
}

func (s *pendingOwnerStore) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	s.mu.Lock()
	if len(s.loads) == 0 || s.loads[len(s.loads)-1] != owner {
		s.loads = append(s.loads, owner)
	}
	s.mu.Unlock()
	return s.Store.List(ctx, owner, statuses...)
}

func (s *pendingOwnerStore) PendingOwners(ctx context.Context, owners []string) ([]string, error) {
	s.mu.Lock()
	s.asked = append(s.asked, slices.Clone(owners))
	s.mu.Unlock()
	var pending []string
	for _, o := range owners {
		for meta, err := range s.Store.List(ctx, o) {
			if err != nil {
				return nil, err
			}
			if !meta.Status.IsTerminal() || !meta.Announced {
				pending = append(pending, o)
				break
			}
		}
	}
	return pending, nil
}

// With a PendingOwnerFinder, Restore follows the interrupted tasks only to
// those that own records it has work for: one question per batch, the
// records of the owners named only, and the same records and events as
// reading each.
func TestRestoreAsksTheStoreWhichTasksOwnTasks(t *testing.T) {
	st := &pendingOwnerStore{Store: memstore.New()}
	at := clock.Now()
	for _, r := range []bgtype.TaskMeta{
		{ID: "task_1_agent", Owner: "thread-1", Type: bgtype.TypeSubAgent, Status: bgtype.StatusRunning, CreatedAt: at.Add(-4 * time.Second), Instance: "gone", Attempt: 1},
		{ID: "task_2_plain", Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: at.Add(-3 * time.Second), Instance: "gone", Attempt: 1},
		{ID: "task_3_fetch", Owner: "task_1_agent", Type: bgtype.TypeTask, Status: bgtype.StatusQueued, CreatedAt: at.Add(-2 * time.Second), Instance: "gone", Attempt: 1},
		{ID: "task_4_done", Owner: "task_2_plain", Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, CreatedAt: at.Add(-time.Second), FinishedAt: at, Instance: "gone", Attempt: 1, Announced: true},
	} {
		if err := st.Store.Commit(t.Context(), r.Owner, store.UpsertAction(r)); err != nil {
			t.Fatal(err)
		}
	}
	m := newTestManager(t, WithStore(st))
	got, err := m.Restore(t.Context(), "thread-1")
	if want := []string{"task_1_agent", "task_2_plain", "task_3_fetch"}; err != nil || !slices.Equal(restoredIDs(got), want) {
		t.Fatalf("Restore = %v, %v; want %v", restoredIDs(got), err, want)
	}
	if want := []string{"thread-1", "task_1_agent"}; !slices.Equal(st.loads, want) {
		t.Fatalf("Restore listed the records of %v, want %v (task_2_plain owns nothing pending)", st.loads, want)
	}
	if len(st.asked) != 2 || !slices.Equal(st.asked[0], []string{"task_1_agent", "task_2_plain"}) || !slices.Equal(st.asked[1], []string{"task_3_fetch"}) {
		t.Fatalf("PendingOwners asked %v, want [[task_1_agent task_2_plain] [task_3_fetch]]", st.asked)
	}
	var evs []string
	for _, ev := range drainOwner(t, m.Owner("thread-1")) {
		evs = append(evs, string(ev.Kind)+" "+ev.TaskID)
	}
	if want := []string{"interrupted task_1_agent", "interrupted task_2_plain", "interrupted task_3_fetch"}; !slices.Equal(evs, want) {
		t.Fatalf("events %v, want %v", evs, want)
	}
}
