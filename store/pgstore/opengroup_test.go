package pgstore_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
)

// lateCase is a group of two spawns queued behind busy slots, and the
// commits that arrive while the group's transaction is open.
type lateCase struct {
	name string
	// late are the records the late commits upsert, in arrival order.
	late func(round int) []bgtype.TaskMeta
	// wantErr is the error text each late commit's caller gets ("": none).
	wantErr    func(i int) string
	wantGroups int64 // groups of several commits written
	wantInOne  int64 // commits those groups held
	wantLate   int64 // commits that joined the open transaction
	wantRows   int64 // records of the round written
}

// Commits that queue while a group's transaction is open, after the
// group's statements, join that transaction: one commit, one flush, for
// the group and them. When a late commit's statement fails, nothing of
// the transaction is written, and every caller of it commits again: only
// the caller the database refuses gets an error. A late commit that names
// a record of the group waits for the next transaction.
func TestGroupLateArrivals(t *testing.T) {
	s, dsn := openStore(t)
	ctx := t.Context()
	seedHolder(t, s)
	id := func(round, i int) string { return fmt.Sprintf("task_%d_%d", round, i) }
	good := func(round int) []bgtype.TaskMeta {
		var ms []bgtype.TaskMeta
		for i := 2; i < 5; i++ {
			ms = append(ms, rec(id(round, i), fmt.Sprintf("owner_%d", i), bgtype.StatusRunning))
		}
		return ms
	}
	none := func(int) string { return "" }
	tests := []lateCase{
		{name: "join", late: good, wantErr: none, wantGroups: 1, wantInOne: 5, wantLate: 3, wantRows: 5},
		{
			name: "one refused",
			late: func(round int) []bgtype.TaskMeta {
				ms := good(round)
				ms[1].Name = "bad\x00name"
				return ms
			},
			wantErr: func(i int) string {
				if i == 1 {
					return "invalid byte sequence"
				}
				return ""
			},
			wantGroups: 0, wantInOne: 0, wantLate: 0, wantRows: 4,
		},
		{
			name: "names the group's record",
			late: func(round int) []bgtype.TaskMeta {
				m := rec(id(round, 0), "owner_0", bgtype.StatusRunning) // the group's first spawn
				m.Description = "changed"
				return []bgtype.TaskMeta{m}
			},
			wantErr: none, wantGroups: 1, wantInOne: 2, wantLate: 0, wantRows: 2,
		},
	}
	for round, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups0, commits0 := pgstore.Groups(s)
			late0 := pgstore.LateCommits(s)
			// After the last round's group, a lone commit would open
			// its transaction (decision 761), and the hook would fire
			// in the held commit's: one lone commit, joined by none,
			// makes the next one take one round trip.
			if err := s.Commit(ctx, "owner_clear", store.UpsertAction(rec(id(round, 9), "owner_clear", bgtype.StatusRunning))); err != nil {
				t.Fatal(err)
			}
			groups0, commits0 = pgstore.Groups(s)
			var wg sync.WaitGroup
			release := holdSlots(t, s, dsn, fmt.Sprintf("round %d", round), &wg)
			for i := range 2 {
				owner := fmt.Sprintf("owner_%d", i)
				m := rec(id(round, i), owner, bgtype.StatusRunning)
				wg.Go(func() {
					if err := s.Commit(ctx, owner, store.UpsertAction(m)); err != nil {
						t.Errorf("group's commit %d: %v", i, err)
					}
				})
			}
			waitFor(t, "the group queues", func() bool { return pgstore.QueuedCommits(s) == 2 })
			late := tt.late(round)
			errs := make([]error, len(late))
			var once sync.Once
			pgstore.SetAfterOpen(s, func() {
				once.Do(func() {
					for i, m := range late {
						wg.Go(func() { errs[i] = s.Commit(ctx, m.Owner, store.UpsertAction(m)) })
					}
					waitQueued(t, s, len(late))
				})
			})
			t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
			release()
			wg.Wait()
			for i, err := range errs {
				want := tt.wantErr(i)
				if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Errorf("late commit %d: %v, want %q", i, err, want)
				}
			}
			groups, commits := pgstore.Groups(s)
			if groups-groups0 != tt.wantGroups || commits-commits0 != tt.wantInOne {
				t.Errorf("%d groups of %d commits, want %d of %d", groups-groups0, commits-commits0, tt.wantGroups, tt.wantInOne)
			}
			if n := pgstore.LateCommits(s) - late0; n != tt.wantLate {
				t.Errorf("%d late commits joined, want %d", n, tt.wantLate)
			}
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id LIKE $1 AND owner <> 'owner_clear'`, fmt.Sprintf("task_%d_%%", round)); n != tt.wantRows {
				t.Errorf("%d records written, want %d", n, tt.wantRows)
			}
		})
	}
	if got, err := s.Get(ctx, "task_2_0"); err != nil || got.Description != "changed" {
		t.Errorf("Get(task_2_0) = %+v, %v; want the late commit's description", got, err)
	}
}

// waitQueued waits, from a goroutine that is not the test's, until n
// commits queue; it reports a failure instead of stopping the goroutine.
func waitQueued(t *testing.T, s *pgstore.Store, n int) {
	deadline := time.Now().Add(hangGuard)
	for pgstore.QueuedCommits(s) != n {
		if time.Now().After(deadline) {
			t.Errorf("%d commits queued after %v, want %d", pgstore.QueuedCommits(s), hangGuard, n)
			return
		}
		runtime.Gosched() // a condition, not a time: the queue fills when the callers get there
	}
}

// A Commit that finds no transaction in flight right after a shared one
// (a group's callers, told together, commit again together) opens its
// transaction to late arrivals, so the commit that queues behind it rides
// its flush; one that finds the last transaction lone commits in one
// round trip, as before.
func TestLoneAfterGroupOpens(t *testing.T) {
	s, dsn := openStore(t)
	ctx := t.Context()
	seedHolder(t, s)
	var wg sync.WaitGroup
	release := holdSlots(t, s, dsn, "lone after group", &wg)
	for i := range 2 {
		m := rec(fmt.Sprintf("task_group_%d", i), fmt.Sprintf("owner_%d", i), bgtype.StatusRunning)
		wg.Go(func() {
			if err := s.Commit(ctx, m.Owner, store.UpsertAction(m)); err != nil {
				t.Errorf("group's commit %d: %v", i, err)
			}
		})
	}
	waitFor(t, "the group queues", func() bool { return pgstore.QueuedCommits(s) == 2 })
	release()
	wg.Wait()

	var opened int
	var lateErr error
	late := rec("task_late", "owner_late", bgtype.StatusRunning)
	pgstore.SetAfterOpen(s, func() {
		opened++
		if opened == 1 {
			wg.Go(func() { lateErr = s.Commit(ctx, late.Owner, store.UpsertAction(late)) })
			waitQueued(t, s, 1)
		}
	})
	t.Cleanup(func() { pgstore.SetAfterOpen(s, nil) })
	groups0, commits0 := pgstore.Groups(s)
	late0 := pgstore.LateCommits(s)
	for i, id := range []string{"task_lone_0", "task_lone_1", "task_lone_2"} {
		if err := s.Commit(ctx, "owner_lone", store.UpsertAction(rec(id, "owner_lone", bgtype.StatusRunning))); err != nil {
			t.Fatalf("lone commit %d: %v", i, err)
		}
		wg.Wait()
	}
	if lateErr != nil {
		t.Errorf("late commit: %v", lateErr)
	}
	// The first opened and was joined; the second found the last
	// transaction shared, opened, and was joined by none; the third found
	// it lone and took one round trip.
	if opened != 2 {
		t.Errorf("%d lone commits opened their transaction, want 2", opened)
	}
	groups, commits := pgstore.Groups(s)
	if groups-groups0 != 1 || commits-commits0 != 2 {
		t.Errorf("%d groups of %d commits, want 1 of 2", groups-groups0, commits-commits0)
	}
	if n := pgstore.LateCommits(s) - late0; n != 1 {
		t.Errorf("%d late commits joined, want 1", n)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id IN ('task_late', 'task_lone_0', 'task_lone_1', 'task_lone_2', 'task_group_0', 'task_group_1')`); n != 6 {
		t.Errorf("%d records written, want 6", n)
	}
}
