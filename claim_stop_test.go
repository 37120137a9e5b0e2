package bgtask

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// queueStore is the memory store with a queue of waiting resumable
// records (store.KindQueue), as a shared store has, for one owner; its
// Get of the claimed record holds the claimer right after its claim
// until the test releases it.
type queueStore struct {
	*memstore.Store
	owner, target    string
	once             sync.Once
	reached, release chan struct{}
}

func (s *queueStore) WaitingTasks(ctx context.Context, limit int) ([]bgtype.TaskMeta, error) {
	var out []bgtype.TaskMeta
	for m, err := range s.List(ctx, s.owner, bgtype.StatusQueued) {
		if err != nil {
			return out, err
		}
		if store.Waiting(&m) && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *queueStore) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	m, err := s.Store.Get(ctx, id)
	if err == nil && id == s.target && m.Status == bgtype.StatusRunning {
		s.once.Do(func() { // the claimer's read back of its claim
			close(s.reached)
			<-s.release
		})
	}
	return m, err
}

// TestClaimedStartFindsManagerStopping: a Manager claims a waiting record
// and, before the attempt starts, begins to stop. The record goes back to
// the queue as a yield (no attempt counted, the stop named), its owner
// hears nothing, and another instance runs the next attempt to its end.
func TestClaimedStartFindsManagerStopping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const owner = "thread-1"
		qs := &queueStore{Store: memstore.New(), owner: owner, target: "task_waiting", reached: make(chan struct{}), release: make(chan struct{})}
		waiting := bgtype.TaskMeta{ID: qs.target, Owner: owner, Status: bgtype.StatusQueued, Attempt: 1, CreatedAt: time.Now().UTC(),
			Resume: &bgtype.Resume{Kind: "crawl/v1", Spec: json.RawMessage(`{"url":"https://example.com","pages":2}`), MaxAttempts: 3}}
		if err := qs.Commit(t.Context(), owner, store.UpsertAction(waiting)); err != nil {
			t.Fatal(err)
		}
		ran := make(chan int, 2)
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			ran <- tk.Attempt()
			return fmt.Sprintf("%d pages", s.Pages), nil
		}, KindConfig{})
		m, err := New(WithStore(qs), WithKinds(k), WithInstance("inst-a"))
		if err != nil {
			t.Fatal(err)
		}
		<-qs.reached // its claim loop claimed the record and reads it back
		if got := getTask(t, qs.Store, qs.target); got.Status != bgtype.StatusRunning || got.Instance != "inst-a" {
			t.Fatalf("claimed record %s on %q", got.Status, got.Instance)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- m.Stop(t.Context()) }()
		<-m.closing // Stop began: the claimed start finds the Manager closed
		close(qs.release)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		got := getTask(t, qs.Store, qs.target)
		if got.Status != bgtype.StatusQueued || got.Instance != "" || got.Attempt != 2 || got.Resume.Yields != 1 ||
			got.Resume.Counted(got.Attempt) != 1 || got.Resume.LastError != `its runtime (instance "inst-a") stopped for a deploy` {
			t.Fatalf("record after the stop: %s on %q, attempt %d, resume %+v", got.Status, got.Instance, got.Attempt, got.Resume)
		}
		select {
		case a := <-ran:
			t.Fatalf("attempt %d ran on the stopping instance", a)
		default:
		}

		// Another instance claims it and runs attempt 2 (the first counted)
		// to its end; the
		// owner hears of it once.
		mb, err := New(WithStore(qs), WithKinds(k), WithInstance("inst-b"))
		if err != nil {
			t.Fatal(err)
		}
		defer mb.Shutdown(context.WithoutCancel(t.Context()))
		if a := <-ran; a != 1 { // the yield is not counted (Task.Attempt)
			t.Fatalf("inst-b ran counted attempt %d, want 1", a)
		}
		synctest.Wait()
		got = getTask(t, qs.Store, qs.target)
		if got.Status != bgtype.StatusCompleted || got.Instance != "inst-b" || got.Attempt != 2 || string(got.Result) != `"2 pages"` {
			t.Fatalf("record after inst-b: %s on %q, attempt %d, result %s", got.Status, got.Instance, got.Attempt, got.Result)
		}
		evs := drainOwner(t, mb.Owner(owner))
		if len(evs) != 1 || evs[0].TaskID != qs.target || evs[0].Kind != bgtype.EventCompleted {
			t.Fatalf("owner's events %+v, want the one completion", evs)
		}
	})
}
