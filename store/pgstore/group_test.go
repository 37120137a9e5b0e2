package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// Commits made while every transaction slot is busy wait, and then go to
// the database together: one transaction for all of them. When that
// transaction fails, each commits alone, so only the caller whose record
// the database refuses gets an error.
func TestGroupCommit(t *testing.T) {
	s, dsn := openStore(t, pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	seedHolder(t, s)
	tests := []struct {
		name       string
		bad        int // the caller whose record has a NUL byte, or -1
		wantGroups int64
	}{
		{"all good", -1, 1},
		{"one refused", 3, 0},
	}
	for round, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups0, commits0 := pgstore.Groups(s)
			var wg sync.WaitGroup
			release := holdSlots(t, s, dsn, fmt.Sprintf("round %d", round), &wg)
			const callers = 8
			errs := make([]error, callers)
			for i := range callers {
				owner := fmt.Sprintf("owner_%d", i)
				m := rec(fmt.Sprintf("task_%d_%d", round, i), owner, bgtype.StatusRunning)
				if i == tt.bad {
					m.Name = "bad\x00name"
				}
				wg.Go(func() { errs[i] = s.Commit(ctx, owner, store.UpsertAction(m)) })
			}
			waitFor(t, "the commits queue", func() bool { return pgstore.QueuedCommits(s) == callers })
			release()
			wg.Wait()
			for i, err := range errs {
				switch {
				case i == tt.bad && (err == nil || !strings.Contains(err.Error(), "invalid byte sequence")):
					t.Errorf("caller %d (bad record): %v, want the database's refusal", i, err)
				case i != tt.bad && err != nil:
					t.Errorf("caller %d: %v", i, err)
				}
			}
			want := int64(callers)
			if tt.bad >= 0 {
				want--
			}
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id LIKE $1`, fmt.Sprintf("task_%d_%%", round)); n != want {
				t.Errorf("%d records written, want %d", n, want)
			}
			groups, commits := pgstore.Groups(s)
			if groups-groups0 != tt.wantGroups || commits-commits0 != tt.wantGroups*callers {
				t.Errorf("%d groups of %d commits, want %d of %d", groups-groups0, commits-commits0, tt.wantGroups, tt.wantGroups*callers)
			}
		})
	}
}

// A caller whose ctx ends while its commit waits for a group gets ctx's
// error, leaves the queue, and nothing of its commit is written.
func TestGroupCommitCanceledWhileQueued(t *testing.T) {
	s, dsn := openStore(t, pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	seedHolder(t, s)
	var wg sync.WaitGroup
	release := holdSlots(t, s, dsn, "changed", &wg)
	qctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Commit(qctx, "alice", store.UpsertAction(rec("task_queued", "alice", bgtype.StatusRunning)))
	}()
	waitFor(t, "the commit queues", func() bool { return pgstore.QueuedCommits(s) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued commit after cancel: %v, want context.Canceled", err)
	}
	if n := pgstore.QueuedCommits(s); n != 0 {
		t.Errorf("%d commits queued after the cancel, want 0", n)
	}
	release()
	wg.Wait()
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id = 'task_queued'`); n != 0 {
		t.Errorf("the cancelled commit wrote %d rows", n)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE owner = 'holder' AND description = 'changed'`); n != int64(pgstore.MaxInFlight) {
		t.Errorf("%d of the held commits written, want %d", n, pgstore.MaxInFlight)
	}
}

// seedHolder commits the running records of owner "holder" that
// holdSlots' commits change.
func seedHolder(t *testing.T, s *pgstore.Store) {
	t.Helper()
	for i := range pgstore.MaxInFlight {
		id := fmt.Sprintf("task_block_%d", i)
		if err := s.Commit(t.Context(), "holder", store.UpsertAction(rec(id, "holder", bgtype.StatusRunning))); err != nil {
			t.Fatal(err)
		}
	}
}

// holdSlots holds the rows seedHolder wrote in a transaction of its own
// and starts one commit per transaction slot that changes them (their
// description set to desc, counted in wg): those commits keep every slot
// busy, so the next ones queue, until release ends the holding
// transaction. release is also called at the end of the test.
func holdSlots(t *testing.T, s *pgstore.Store, dsn, desc string, wg *sync.WaitGroup) (release func()) {
	t.Helper()
	ctx := t.Context()
	release = holdLocks(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE owner = 'holder' FOR UPDATE`)
	for i := range pgstore.MaxInFlight {
		m := rec(fmt.Sprintf("task_block_%d", i), "holder", bgtype.StatusRunning)
		m.Description = desc
		wg.Go(func() {
			if err := s.Commit(ctx, "holder", store.UpsertAction(m)); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "the first commits wait for the held rows", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'`) == pgstore.MaxInFlight
	})
	return release
}

// holdLocks runs query (a SELECT ... FOR UPDATE) in a transaction of the
// test's own, which holds its locks until release (also called at the
// end of the test).
func holdLocks(t *testing.T, dsn, query string) (release func()) {
	t.Helper()
	tx, err := sqlConn(t, dsn).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	release = func() { tx.Rollback(context.Background()) }
	t.Cleanup(release)
	if _, err := tx.Exec(t.Context(), query); err != nil {
		t.Fatal(err)
	}
	return release
}
