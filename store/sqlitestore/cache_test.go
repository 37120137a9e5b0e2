package sqlitestore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// The writer reads only the records it cannot know: a new record is
// inserted without a read, a live record it wrote is updated without one;
// a terminal record, or one another connection wrote, is read (and, since
// the writer cannot tell whether its row ever ended, read again next time).
func TestCommitReadsOnlyWhatTheWriterCannotKnow(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	raw := rawDB(t, path)
	progress := func(n int, done int64) bgtype.TaskMeta {
		m := rec("a", n, "")
		m.Status, m.Type, m.CreatedAt, m.Instance = "", "", time.Time{}, ""
		m.Progress = &bgtype.Progress{Done: done, Total: 10, At: base.Add(time.Minute)}
		return m
	}
	for _, step := range []struct {
		name   string
		before func()
		action store.Action
		reads  int64
	}{
		{"new running record", nil, store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), 0},
		{"its progress", nil, store.UpsertAction(progress(1, 3)), 0},
		{"its completion", nil, store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)), 0},
		{"announcing it", nil, store.AnnounceAction(rec("a", 1, "").ID), 1},
		{"a record another program inserted", func() {
			execSQL(t, raw, `INSERT INTO tasks (id, owner, task_type, name, status, created_at, instance, attempt) VALUES ('task_a_02', 'a', 'task', '', 'queued', 0, 'inst-a', 0)`)
		}, store.UpsertAction(rec("a", 2, bgtype.StatusRunning)), 1},
		{"then its progress: a record read is not kept", nil, store.UpsertAction(progress(2, 4)), 1},
		{"its progress after another program wrote", func() {
			execSQL(t, raw, `UPDATE tasks SET description = 'edited' WHERE id = 'task_a_02'`)
		}, store.UpsertAction(progress(2, 5)), 1},
	} {
		if step.before != nil {
			step.before()
		}
		was := sqlitestore.WriterReads(s)
		commit(t, s, "a", step.action)
		if got := sqlitestore.WriterReads(s) - was; got != step.reads {
			t.Fatalf("%s: %d reads, want %d", step.name, got, step.reads)
		}
	}
	if m := get(t, s, rec("a", 1, "").ID); m.Status != bgtype.StatusCompleted || !m.Announced || m.Progress == nil || m.Progress.Done != 3 {
		t.Fatalf("task_a_01 = %s announced=%v progress=%v, want completed, announced, 3/10", m.Status, m.Announced, m.Progress)
	}
	if m := get(t, s, rec("a", 2, "").ID); m.Status != bgtype.StatusRunning || m.Description != "edited" || m.Progress == nil || m.Progress.Done != 5 {
		t.Fatalf("task_a_02 = %s %q progress=%v, want running, edited, 5/10", m.Status, m.Description, m.Progress)
	}
}

// A record another connection changed is reduced from what it holds now,
// not from what the writer wrote before.
func TestCommitSeesAnotherConnectionsWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql string
		want      bgtype.Status // task_a_01's status after the completion
	}{
		{"cancelled there", `UPDATE tasks SET status = 'cancelled', finished_at = 1 WHERE id = 'task_a_01'`, bgtype.StatusCanceled},
		{"moved to another owner", `UPDATE tasks SET owner = 'b' WHERE id = 'task_a_01'`, bgtype.StatusRunning},
		{"deleted there", `DELETE FROM tasks WHERE id = 'task_a_01'`, bgtype.StatusCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, path := open(t)
			commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)))
			execSQL(t, rawDB(t, path), tc.sql)
			commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)))
			if m := get(t, s, rec("a", 1, "").ID); m.Status != tc.want {
				t.Fatalf("task_a_01 = %s, want %s", m.Status, tc.want)
			}
		})
	}
}

// A commit that is rolled back leaves nothing in the writer's cache: an
// update without a status of a record it wrote before failing finds no
// record, alone or in a shared transaction.
func TestRolledBackCommitLeavesNothingCached(t *testing.T) {
	t.Parallel()
	statusless := rec("a", 1, "")
	statusless.Status, statusless.Description = "", "more"
	for _, tc := range []struct {
		name string
		opts []sqlitestore.Option
		also bool // a second caller shares the transaction
	}{
		{"alone", nil, false},
		{"in a batch", []sqlitestore.Option{sqlitestore.WithMaxBatch(2), sqlitestore.WithBatchDelay(time.Hour)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seed, path := open(t)
			if err := seed.Close(); err != nil {
				t.Fatal(err)
			}
			execSQL(t, rawDB(t, path), `CREATE TRIGGER refuse BEFORE INSERT ON tasks WHEN new.id = 'task_a_09' BEGIN SELECT RAISE(ABORT, 'refused'); END`)
			s := openAt(t, path, append(tc.opts, sqlitestore.WithoutRecovery())...)
			var wg sync.WaitGroup
			var bad, good error
			wg.Go(func() {
				bad = s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)), store.UpsertAction(rec("a", 9, bgtype.StatusRunning)))
			})
			if tc.also {
				wg.Go(func() { good = s.Commit(t.Context(), "b", store.UpsertAction(rec("b", 1, bgtype.StatusRunning))) })
			}
			wg.Wait()
			wantErr(t, "Commit refused by the trigger", bad, "sqlitestore: write task task_a_09: constraint failed: refused (1811)")
			if good != nil {
				t.Fatalf("the other commit: %v", good)
			}
			wg.Go(func() { commit(t, s, "a", store.UpsertAction(statusless)) })
			if tc.also {
				wg.Go(func() { commit(t, s, "b", store.UpsertAction(rec("b", 2, bgtype.StatusRunning))) })
			}
			wg.Wait()
			if _, err := s.Get(t.Context(), statusless.ID); !errors.Is(err, bgtask.ErrNotFound) {
				t.Fatalf("Get(%s) after the rolled back commit and an update: %v, want ErrNotFound", statusless.ID, err)
			}
		})
	}
}
