package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/store/storetest"
)

// batchSizes records the size of every batch the writer takes.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) hook(n int) {
	b.mu.Lock()
	b.sizes = append(b.sizes, n)
	b.mu.Unlock()
}

func (b *batchSizes) want(t *testing.T, want ...int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Equal(b.sizes, want) {
		t.Fatalf("batch sizes = %v, want %v", b.sizes, want)
	}
}

// Concurrent Commit calls are written in one transaction. The batch delay
// is an hour, so the batch is written only once it is full: every call
// returning proves they were merged.
func TestConcurrentCommitsShareOneTransaction(t *testing.T) {
	t.Parallel()
	var sizes batchSizes
	s, _ := open(t, sqlitestore.WithMaxBatch(8), sqlitestore.WithBatchDelay(time.Hour), sqlitestore.WithHookTaken(sizes.hook))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			owner := fmt.Sprintf("owner-%d", i%3)
			errs[i] = s.Commit(t.Context(), owner, store.UpsertAction(rec(owner, i, bgtype.StatusCompleted)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	sizes.want(t, 8)
	for i := range 8 {
		owner := fmt.Sprintf("owner-%d", i%3)
		if got := get(t, s, rec(owner, i, "").ID); got.Status != bgtype.StatusCompleted {
			t.Fatalf("%s: %s", got.ID, got.Status)
		}
	}
}

// A Commit that fails inside a shared transaction (here: it updates a
// corrupt row) fails alone, with an error naming the task; the others of
// the batch are written.
func TestFailingCommitFailsAloneInItsBatch(t *testing.T) {
	t.Parallel()
	seed, path := open(t)
	bad := rec("a", 1, bgtype.StatusRunning)
	commit(t, seed, "a", store.UpsertAction(bad), store.UpsertAction(rec("a", 2, bgtype.StatusRunning)))
	commit(t, seed, "b", store.UpsertAction(rec("b", 3, bgtype.StatusRunning)))
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, path, bad.ID, storetest.CorruptStatus)
	var sizes batchSizes
	s := openAt(t, path, sqlitestore.WithMaxBatch(3), sqlitestore.WithBatchDelay(time.Hour), sqlitestore.WithHookTaken(sizes.hook), sqlitestore.WithoutRecovery())

	var wg sync.WaitGroup
	var badErr, goodA, goodB error
	wg.Go(func() {
		badErr = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)), store.UpsertAction(rec("a", 4, bgtype.StatusRunning)))
	})
	wg.Go(func() { goodA = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 2, bgtype.StatusCompleted))) })
	wg.Go(func() { goodB = s.Commit(t.Context(), "b", store.UpsertAction(rec("b", 3, bgtype.StatusFailed))) })
	wg.Wait()
	sizes.want(t, 3)
	wantErr(t, "Commit over a corrupt row", badErr,
		`sqlitestore: task task_a_01: bgtask: corrupt task metadata: unknown status "paused"`, bgtype.ErrCorrupt)
	if goodA != nil || goodB != nil {
		t.Fatalf("the other commits of the batch: %v, %v", goodA, goodB)
	}
	if _, err := s.Get(t.Context(), rec("a", 4, "").ID); !errors.Is(err, bgtask.ErrNotFound) {
		t.Fatalf("the failed commit's other action was written: %v", err)
	}
	if a, b := get(t, s, rec("a", 2, "").ID), get(t, s, rec("b", 3, "").ID); a.Status != bgtype.StatusCompleted || b.Status != bgtype.StatusFailed {
		t.Fatalf("after the batch: %s %s, want completed failed", a.Status, b.Status)
	}
}

// doneSignal is a context whose Done is first asked for once Commit has
// queued its request; it then reports it and, if cancel is set, is
// cancelled at that moment.
type doneSignal struct {
	context.Context
	cancel  bool
	once    sync.Once
	waiting chan struct{} // closed when Commit waits
	done    chan struct{}
}

func newDoneSignal(cancel bool) *doneSignal {
	return &doneSignal{Context: context.Background(), cancel: cancel, waiting: make(chan struct{}), done: make(chan struct{})}
}

func (c *doneSignal) Done() <-chan struct{} {
	c.once.Do(func() {
		close(c.waiting)
		if c.cancel {
			close(c.done)
		}
	})
	return c.done
}

func (c *doneSignal) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

// holdWriter makes the writer stop on its first batch until release is
// closed; held is closed when it has stopped.
func holdWriter() (hook func(int), held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	return func(int) { once.Do(func() { close(held); <-release }) }, held, release
}

// A Commit whose ctx ends while it is still queued is withdrawn: it returns
// ctx's error and is never written. One whose ctx ends after the writer took
// it returns the transaction's outcome.
func TestCommitWithdrawnWhenCtxEnds(t *testing.T) {
	t.Parallel()
	hook, held, release := holdWriter()
	s, _ := open(t, sqlitestore.WithMaxBatch(1), sqlitestore.WithHookTaken(hook))

	ctx1, cancel1 := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { first <- s.Commit(ctx1, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning))) }()
	<-held // the writer has taken the first request
	cancel1()

	ctx2 := newDoneSignal(true)
	err := s.Commit(ctx2, "a", store.UpsertAction(rec("a", 2, bgtype.StatusRunning)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit withdrawn while queued = %v, want context.Canceled", err)
	}
	ctx3, cancel3 := context.WithCancel(t.Context())
	cancel3()
	if err := s.Commit(ctx3, "a", store.UpsertAction(rec("a", 3, bgtype.StatusRunning))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled ctx = %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("Commit taken by the writer, then cancelled = %v, want its outcome (nil)", err)
	}
	commit(t, s, "a", store.UpsertAction(rec("a", 4, bgtype.StatusRunning)))
	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 1, 4))
}

// Close writes every Commit it accepted before it, then refuses new ones.
func TestCloseWritesAcceptedCommits(t *testing.T) {
	t.Parallel()
	hook, held, release := holdWriter()
	path := t.TempDir() + "/tasks.db"
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithMaxBatch(1), sqlitestore.WithHookTaken(hook))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { errs[0] = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 0, bgtype.StatusRunning))) })
	<-held
	for i := 1; i < 4; i++ {
		ctx := newDoneSignal(false)
		wg.Go(func() { errs[i] = s.Commit(ctx, "a", store.UpsertAction(rec("a", i, bgtype.StatusRunning))) })
		<-ctx.waiting // queued
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("commits accepted before Close: %v", err)
	}
	if err := s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 9, bgtype.StatusRunning))); !errors.Is(err, sqlitestore.ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	s = openAt(t, path)
	wantIDs(t, "List(a) after reopen", ids(t, s, "a"), idsOf("a", 0, 1, 2, 3))
}

// With a short batch delay a lone Commit is written when the delay ends.
func TestBatchDelayEnds(t *testing.T) {
	t.Parallel()
	var sizes batchSizes
	s, _ := open(t, sqlitestore.WithBatchDelay(time.Millisecond), sqlitestore.WithHookTaken(sizes.hook))
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)))
	sizes.want(t, 1)
}

// A Commit that fails after it wrote (here: a trigger refuses its second
// record) is undone alone: the batch is written again with a savepoint per
// Commit, so its first record is not kept and the others of the batch are
// written once, each with its own outcome.
func TestCommitFailingAfterItWroteFailsAlone(t *testing.T) {
	t.Parallel()
	seed, path := open(t)
	commit(t, seed, "b", store.UpsertAction(rec("b", 5, bgtype.StatusRunning)))
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}
	execSQL(t, rawDB(t, path), `CREATE TRIGGER refuse BEFORE INSERT ON tasks WHEN new.id = 'task_a_09' BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	var sizes batchSizes
	s := openAt(t, path, sqlitestore.WithMaxBatch(3), sqlitestore.WithBatchDelay(time.Hour), sqlitestore.WithHookTaken(sizes.hook), sqlitestore.WithoutRecovery())

	var wg sync.WaitGroup
	var badErr, goodA, goodB error
	wg.Go(func() {
		badErr = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 9, bgtype.StatusRunning)))
	})
	wg.Go(func() { goodA = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 2, bgtype.StatusCompleted))) })
	wg.Go(func() { goodB = s.Commit(t.Context(), "b", store.UpsertAction(rec("b", 5, bgtype.StatusFailed))) })
	wg.Wait()
	sizes.want(t, 3)
	wantErr(t, "Commit refused by the trigger", badErr, "sqlitestore: write task task_a_09: constraint failed: refused (1811)")
	if goodA != nil || goodB != nil {
		t.Fatalf("the other commits of the batch: %v, %v", goodA, goodB)
	}
	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 2))
	if b := get(t, s, rec("b", 5, "").ID); b.Status != bgtype.StatusFailed {
		t.Fatalf("owner b's record: %s, want failed", b.Status)
	}
}
