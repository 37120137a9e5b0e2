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
	s, dsn := openStore(t, pgstore.WithLoneCommitsAlone())
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
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE id LIKE $1`, fmt.Sprintf("task_%d_%%", round)); n != tt.wantRows {
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
