package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A silent task that the reaper interrupts tells no one, as Restore and
// the SQLite store do: no notice, no undelivered owner, nothing handed to
// a run; a task that is not silent is told once (issue 30, item 4).
func TestReapedSilentTaskTellsNoOne(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	sb, mb, _ := instanceStore(t, dsn, "inst_b")
	silent, err := ma.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil), bgtask.WithWake(bgtype.WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	loud, err := ma.Owner("bob").Spawn(t.Context(), blockUntilCanceled(nil))
	if err != nil {
		t.Fatal(err)
	}
	killInstance(t, dsn, "inst_a")
	if n, err := sb.Reap(t.Context()); err != nil || n != 2 {
		t.Fatalf("Reap = %d, %v; want 2", n, err)
	}
	if meta, err := mb.Owner("alice").Get(t.Context(), silent); err != nil || meta.Status != bgtype.StatusInterrupted {
		t.Fatalf("silent task after the reap: %+v, %v; want interrupted", meta, err)
	}
	var owners []string
	for o, err := range mb.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
	}
	if want := []string{"bob"}; !slices.Equal(owners, want) {
		t.Fatalf("UndeliveredOwners = %q, want %q", owners, want)
	}
	for owner, want := range map[string][]string{"alice": nil, "bob": {loud}} {
		seen := map[string]int{}
		run := startRun(t, mb, owner, "run_"+owner, seen)
		run.step()
		run.step()
		run.end()
		var got []string
		for id := range seen {
			got = append(got, id)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s's run was handed the ends of %q, want %q", owner, got, want)
		}
	}
}

// After start, a reaper pass that interrupts another instance's tasks
// names their owners to WithOnPendingOwner, once each per pass, the live
// owner for a dead sub-agent's tasks (issue 30, item 6).
func TestReapNamesOwnersToPendingOwnerCallback(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	var (
		mu    sync.Mutex
		named []string
	)
	// zed has news before inst_b starts: the pass at start names it, and
	// only it.
	zed, err := ma.Owner("zed").Spawn(t.Context(), func(context.Context, *bgtask.Task) (any, error) { return "ok", nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ma.Wait(t.Context(), zed); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 2 {
		if _, err := ma.Owner("bob").Spawn(ctx, blockUntilCanceled(nil)); err != nil {
			t.Fatal(err)
		}
	}
	subAgentTree(t, ma, "carol", 1, 2, false)
	sb, err := pgstore.Open(ctx, dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	mb, err := bgtask.New(bgtask.WithStore(sb), bgtask.WithInstance("inst_b"), bgtask.WithOnPendingOwner(func(owner string) {
		mu.Lock()
		named = append(named, owner)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mb.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	if err := sb.Start(ctx, mb.Runtime()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pass at start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(named) == 1
	})
	mu.Lock()
	named = nil // "zed", read before the kill: the pass has listed its owners
	mu.Unlock()
	killInstance(t, dsn, "inst_a")
	if n, err := sb.Reap(ctx); err != nil || n != 5 {
		t.Fatalf("Reap = %d, %v; want 5 (two of bob's, carol's sub-agent and its two children)", n, err)
	}
	waitFor(t, "the calls of the reap's owners (made on the Manager's callback goroutine)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(named) >= 2
	})
	if err := mb.Shutdown(context.Background()); err != nil { // waits for every queued call
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(named)
	mu.Unlock()
	slices.Sort(got)
	if want := []string{"bob", "carol"}; !slices.Equal(got, want) {
		t.Fatalf("WithOnPendingOwner named %q, want %q once each", got, want)
	}
}
