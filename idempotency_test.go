package bgtask

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Concurrent spawns with one key start the function once and all return
// its id; the store holds one record.
func TestIdempotentSpawnConcurrent(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	var starts atomic.Int64
	release := make(chan struct{})
	fn := func(ctx context.Context, tk *Task) (any, error) {
		starts.Add(1)
		<-release
		return "done", nil
	}
	const n = 32
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], errs[i] = o.Spawn(t.Context(), fn, WithIdempotencyKey("job-1")) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("spawn %d: %q, %v; want %q, nil", i, ids[i], errs[i], ids[0])
		}
	}
	close(release)
	rec := waitTask(t, o, ids[0])
	if got := starts.Load(); got != 1 {
		t.Fatalf("function started %d times, want 1", got)
	}
	var keyed int
	for _, meta := range listTasks(t, o) {
		if meta.IdempotencyKey == "job-1" {
			keyed++
		}
	}
	if keyed != 1 || rec.IdempotencyKey != "job-1" || rec.Status != bgtype.StatusCompleted {
		t.Fatalf("%d records with the key; record %+v", keyed, rec)
	}
	// The ended task's record still holds the key.
	again, err := o.Spawn(t.Context(), fn, WithIdempotencyKey("job-1"))
	if err != nil || again != ids[0] || starts.Load() != 1 {
		t.Fatalf("spawn after the end: %q, %v, %d starts; want %q, nil, 1", again, err, starts.Load(), ids[0])
	}
	shutdownManager(t, m)
}

// A key is the owner's: another owner's same key is a new task; a queued
// task answers for its key; a spawn whose first commit failed leaves the
// key free; once retention forgets the record, the key is free.
func TestIdempotentSpawnCases(t *testing.T) {
	t.Parallel()
	st := newFailingStore()
	m := newTestManager(t, WithStore(st), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
	ctx := t.Context()
	alice, bob := m.Owner("alice"), m.Owner("bob")
	first, probe := spawnProbe(t, ctx, alice, WithIdempotencyKey("k"))
	<-probe.started

	// Another owner, same key: its own task (queued behind the limit).
	b1, err := bob.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("k"))
	if err != nil || b1 == first {
		t.Fatalf("bob's spawn: %q, %v; want a task of its own", b1, err)
	}
	// A queued task answers for its key too.
	q1, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("q"))
	if err != nil {
		t.Fatal(err)
	}
	if q2, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("q")); err != nil || q2 != q1 {
		t.Fatalf("second spawn of a queued key: %q, %v; want %q", q2, err, q1)
	}
	if meta, _ := alice.Get(ctx, q1); meta.Status != bgtype.StatusQueued {
		t.Fatalf("queued task status %s", meta.Status)
	}
	// The first commit fails: the spawn fails and the key stays free.
	st.fail(1, bgtype.StatusQueued)
	if id, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("f")); !errors.Is(err, errInjected) || id != "" {
		t.Fatalf("spawn with a failing commit: %q, %v", id, err)
	}
	f1, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("f"))
	if err != nil || f1 == "" {
		t.Fatalf("spawn after the failed one: %q, %v", f1, err)
	}
	close(probe.release)
	for _, id := range []string{first, b1, q1, f1} {
		waitTask(t, m, id)
	}
	if id, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("k")); err != nil || id != first {
		t.Fatalf("spawn of an ended task's key: %q, %v; want %q", id, err, first)
	}
	// Retention forgets the record: the key is free.
	if err := st.Commit(ctx, "alice", store.RemoveAction(first)); err != nil {
		t.Fatal(err)
	}
	if id, err := alice.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("k")); err != nil || id == first || id == "" {
		t.Fatalf("spawn after the record was removed: %q, %v; want a new task", id, err)
	}
	shutdownManager(t, m)
}

// A key must be non-blank UTF-8 text without control characters, at most
// MaxIdempotencyKeyBytes long; nothing is stored for a refused one.
func TestIdempotencyKeyInvalid(t *testing.T) {
	t.Parallel()
	st := &countingStore{Store: memstore.New()}
	m := newTestManager(t, WithStore(st))
	for _, tc := range []struct{ key, want string }{
		{"", "bgtask: invalid argument: idempotency key is blank"},
		{" \t", "bgtask: invalid argument: idempotency key is blank"},
		{strings.Repeat("k", MaxIdempotencyKeyBytes+1), "bgtask: invalid argument: idempotency key longer than 256 bytes"},
		{"a\xffb", "bgtask: invalid argument: idempotency key is not UTF-8"},
		{"a\nb", "bgtask: invalid argument: idempotency key has control characters"},
	} {
		id, err := m.Owner("alice").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey(tc.key))
		if id != "" || err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("key %q: %q, %v; want %q", tc.key, id, err, tc.want)
		}
	}
	if n := st.commits.Load(); n != 0 {
		t.Errorf("%d commits for refused spawns, want 0", n)
	}
	if id, err := m.Owner("alice").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey(strings.Repeat("é", MaxIdempotencyKeyBytes/2))); err != nil || id == "" {
		t.Errorf("longest key: %q, %v", id, err)
	}
	shutdownManager(t, m)
}

// A live task answers for its key before any limit is checked: a spawn
// with its key over a full concurrency limit returns its id, not ErrLimit.
func TestIdempotentSpawnOverLimit(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithLimits(Limits{MaxConcurrent: 1}))
	o := m.Owner("alice")
	first, probe := spawnProbe(t, t.Context(), o, WithIdempotencyKey("k"))
	if id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }); !errors.Is(err, ErrLimit) {
		t.Fatalf("spawn without a key: %q, %v; want ErrLimit", id, err)
	}
	if id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithIdempotencyKey("k")); err != nil || id != first {
		t.Fatalf("spawn with the live task's key: %q, %v; want %q", id, err, first)
	}
	close(probe.release)
	waitTask(t, o, first)
	shutdownManager(t, m)
}
