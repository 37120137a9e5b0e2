package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// heldRecord opens a Store, commits the running record task_hold of owner
// "holder" through it, and locks that row in a transaction of the test's
// own until release (also called at the end of the test): a commit of
// the record then waits in its first round trip.
func heldRecord(t *testing.T) (s *pgstore.Store, dsn string, release func()) {
	t.Helper()
	s, dsn = openStore(t)
	if err := s.Commit(t.Context(), "holder", store.UpsertAction(rec("task_hold", "holder", bgtype.StatusRunning))); err != nil {
		t.Fatal(err)
	}
	return s, dsn, holdLocks(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_hold' FOR UPDATE`)
}

// The commits that queue while a lone commit's first statements run join
// its transaction (decision 801): one transaction, one flush, for the
// lone commit and them. Once one has joined, the lone caller's ctx no
// longer stops the transaction: it ends with its outcome, like a group's
// caller.
func TestLoneCommitTakesLateArrivals(t *testing.T) {
	s, dsn, release := heldRecord(t)
	ctx := t.Context()
	groups0, commits0 := pgstore.Groups(s)
	late0 := pgstore.LateCommits(s)

	loneCtx, cancelLone := context.WithCancel(ctx)
	defer cancelLone()
	pgstore.SetAfterOpen(s, cancelLone) // after the first round trip, before the late ones join
	t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
	held := rec("task_hold", "holder", bgtype.StatusRunning)
	held.Description = "changed"
	loneErr := make(chan error, 1)
	go func() { loneErr <- s.Commit(loneCtx, "holder", store.UpsertAction(held)) }()
	waitFor(t, "the lone commit waits for the held row", func() bool { return lockWaiters(t, dsn) == 1 })

	const late = 4
	errs := make([]error, late)
	var wg sync.WaitGroup
	for i := range late {
		owner := fmt.Sprintf("owner_%d", i)
		wg.Go(func() {
			errs[i] = s.Commit(ctx, owner, store.UpsertAction(rec(fmt.Sprintf("task_late_%d", i), owner, bgtype.StatusRunning)))
		})
	}
	waitFor(t, "the spawns queue", func() bool { return pgstore.QueuedCommits(s) == late })
	release()
	wg.Wait()
	if err := <-loneErr; err != nil {
		t.Errorf("lone commit, its ctx cancelled after its first round trip: %v, want nil (others joined)", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("late commit %d: %v", i, err)
		}
	}
	groups, commits := pgstore.Groups(s)
	if groups-groups0 != 1 || commits-commits0 != late+1 {
		t.Errorf("%d groups of %d commits, want 1 of %d", groups-groups0, commits-commits0, late+1)
	}
	if n := pgstore.LateCommits(s) - late0; n != late {
		t.Errorf("%d late commits, want %d", n, late)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id LIKE 'task_late_%' OR id = 'task_hold' AND description = 'changed'`); n != late+1 {
		t.Errorf("%d records written, want %d", n, late+1)
	}
}

// A lone commit whose ctx ends during its first round trip, with no
// other commit aboard, returns ctx's error and writes nothing; the Store
// commits as before after it.
func TestLoneCommitCanceledInFirstRoundTrip(t *testing.T) {
	s, dsn, release := heldRecord(t)
	ctx := t.Context()
	loneCtx, cancelLone := context.WithCancel(ctx)
	held := rec("task_hold", "holder", bgtype.StatusRunning)
	held.Description = "changed"
	loneErr := make(chan error, 1)
	go func() { loneErr <- s.Commit(loneCtx, "holder", store.UpsertAction(held)) }()
	waitFor(t, "the lone commit waits for the held row", func() bool { return lockWaiters(t, dsn) == 1 })
	cancelLone()
	if err := <-loneErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("lone commit cancelled in its first round trip: %v, want context.Canceled", err)
	}
	release()
	held.Description = "after"
	if err := s.Commit(ctx, "holder", store.UpsertAction(held)); err != nil {
		t.Fatalf("commit after the cancelled one: %v", err)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_hold' AND description = 'after'`); n != 1 {
		t.Errorf("task_hold not written by the commit after the cancelled one")
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE description = 'changed'`); n != 0 {
		t.Errorf("the cancelled commit wrote %d rows", n)
	}
}
