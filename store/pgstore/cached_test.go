package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// The completion of a record the Store wrote is written without reading
// the row first, on a started Store too (the fence is in the statement),
// and leaves exactly what the long way leaves.
func TestCompletionWithoutRead(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	m := rec("task_a", "alice", bgtype.StatusRunning)
	if err := s.Commit(ctx, "alice", store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
	p := m
	p.Progress = &bgtype.Progress{Done: 1, Total: 2, Message: "half", At: t0.Add(1500e6)}
	done := m
	done.Status, done.FinishedAt, done.Result = bgtype.StatusCompleted, t0.Add(2e9), []byte(`{"n":1}`)
	for _, next := range []bgtype.TaskMeta{p, done} {
		if err := s.Commit(ctx, "alice", store.UpsertAction(next)); err != nil {
			t.Fatal(err)
		}
	}
	if n := pgstore.CachedCommits(s); n != 2 {
		t.Errorf("%d commits written without a read, want 2", n)
	}
	got, err := s.Get(ctx, "task_a")
	if err != nil || got.Status != bgtype.StatusCompleted || string(got.Result) != `{"n":1}` ||
		got.Progress == nil || got.Progress.Message != "half" || !got.FinishedAt.Equal(done.FinishedAt) {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

// Completions of several owners and a spawn queued while every
// transaction slot is busy are written as one group without reading rows,
// and retention keeps each owner's limit, in one statement for all of
// them.
func TestGroupCompletionsRetained(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithRetainPerOwner(1), pgstore.WithLoneCommitsAlone())
	ctx := t.Context()
	seedHolder(t, s)
	owners := []string{"owner_a", "owner_b", "owner_c"}
	var live []bgtype.TaskMeta
	for _, o := range owners {
		for k := range 2 {
			m := rec(fmt.Sprintf("task_%s_%d", o, k), o, bgtype.StatusRunning)
			if err := s.Commit(ctx, o, store.UpsertAction(m)); err != nil {
				t.Fatal(err)
			}
			live = append(live, m)
		}
	}
	var wg sync.WaitGroup
	release := holdSlots(t, s, dsn, "busy", &wg)
	cached0 := pgstore.CachedCommits(s)
	for _, m := range live {
		m.Status, m.FinishedAt, m.Result = bgtype.StatusCompleted, t0.Add(3e9), []byte(`"ok"`)
		wg.Go(func() {
			if err := s.Commit(ctx, m.Owner, store.UpsertAction(m)); err != nil {
				t.Error(err)
			}
		})
	}
	spawned := rec("task_spawned", "owner_a", bgtype.StatusRunning)
	wg.Go(func() {
		if err := s.Commit(ctx, "owner_a", store.UpsertAction(spawned)); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "the completions and the spawn queue", func() bool { return pgstore.QueuedCommits(s) == len(live)+1 })
	groups0, commits0 := pgstore.Groups(s)
	release()
	wg.Wait()
	groups, commits := pgstore.Groups(s)
	if groups-groups0 != 1 || commits-commits0 != int64(len(live)+1) {
		t.Errorf("%d groups of %d commits, want 1 of %d", groups-groups0, commits-commits0, len(live)+1)
	}
	// The four held commits and the group, all without a read.
	if n := pgstore.CachedCommits(s) - cached0; n != pgstore.MaxInFlight+1 {
		t.Errorf("%d commits written without a read, want %d", n, pgstore.MaxInFlight+1)
	}
	for _, o := range owners {
		if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE owner = $1 AND terminal_at IS NOT NULL`, o); n != 1 {
			t.Errorf("%s keeps %d terminal records, want 1", o, n)
		}
	}
	if got, err := s.Get(ctx, spawned.ID); err != nil || got.Status != bgtype.StatusRunning {
		t.Errorf("Get(%s) = %+v, %v; want running", spawned.ID, got, err)
	}
}
