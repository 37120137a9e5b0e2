package sqlitestore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

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
	progress := func(n int, done int64) bgtask.TaskMeta {
		m := rec("a", n, "")
		m.Status, m.Type, m.CreatedAt, m.Instance = "", "", time.Time{}, ""
		m.Progress = &bgtask.TaskProgress{Done: done, Total: 10, At: base.Add(time.Minute)}
		return m
	}
	for _, step := range []struct {
		name   string
		before func()
		action bgtask.Action
		reads  int64
	}{
		{"new running record", nil, bgtask.Upsert(rec("a", 1, bgtask.StatusRunning)), 0},
		{"its progress", nil, bgtask.Upsert(progress(1, 3)), 0},
		{"its completion", nil, bgtask.Upsert(rec("a", 1, bgtask.StatusCompleted)), 0},
		{"announcing it", nil, bgtask.Announce(rec("a", 1, "").ID), 1},
		{"a record another program inserted", func() {
			execSQL(t, raw, `INSERT INTO tasks (id, owner, task_type, name, status, created_at, instance, attempt) VALUES ('task_a_02', 'a', 'task', '', 'queued', 0, 'inst-a', 0)`)
		}, bgtask.Upsert(rec("a", 2, bgtask.StatusRunning)), 1},
		{"then its progress: a record read is not kept", nil, bgtask.Upsert(progress(2, 4)), 1},
		{"its progress after another program wrote", func() {
			execSQL(t, raw, `UPDATE tasks SET description = 'edited' WHERE id = 'task_a_02'`)
		}, bgtask.Upsert(progress(2, 5)), 1},
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
	if m := get(t, s, rec("a", 1, "").ID); m.Status != bgtask.StatusCompleted || !m.Announced || m.Progress == nil || m.Progress.Done != 3 {
		t.Fatalf("task_a_01 = %s announced=%v progress=%v, want completed, announced, 3/10", m.Status, m.Announced, m.Progress)
	}
	if m := get(t, s, rec("a", 2, "").ID); m.Status != bgtask.StatusRunning || m.Description != "edited" || m.Progress == nil || m.Progress.Done != 5 {
		t.Fatalf("task_a_02 = %s %q progress=%v, want running, edited, 5/10", m.Status, m.Description, m.Progress)
	}
}

// A record another connection changed is reduced from what it holds now,
// not from what the writer wrote before.
func TestCommitSeesAnotherConnectionsWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql string
		want      bgtask.TaskStatus // task_a_01's status after the completion
	}{
		{"cancelled there", `UPDATE tasks SET status = 'cancelled', finished_at = 1 WHERE id = 'task_a_01'`, bgtask.StatusCancelled},
		{"moved to another owner", `UPDATE tasks SET owner = 'b' WHERE id = 'task_a_01'`, bgtask.StatusRunning},
		{"deleted there", `DELETE FROM tasks WHERE id = 'task_a_01'`, bgtask.StatusCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, path := open(t)
			commit(t, s, "a", bgtask.Upsert(rec("a", 1, bgtask.StatusRunning)))
			execSQL(t, rawDB(t, path), tc.sql)
			commit(t, s, "a", bgtask.Upsert(rec("a", 1, bgtask.StatusCompleted)))
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
				bad = s.Commit(t.Context(), "a", bgtask.Upsert(rec("a", 1, bgtask.StatusRunning)), bgtask.Upsert(rec("a", 9, bgtask.StatusRunning)))
			})
			if tc.also {
				wg.Go(func() { good = s.Commit(t.Context(), "b", bgtask.Upsert(rec("b", 1, bgtask.StatusRunning))) })
			}
			wg.Wait()
			wantErr(t, "Commit refused by the trigger", bad, "sqlitestore: write task task_a_09: constraint failed: refused (1811)")
			if good != nil {
				t.Fatalf("the other commit: %v", good)
			}
			wg.Go(func() { commit(t, s, "a", bgtask.Upsert(statusless)) })
			if tc.also {
				wg.Go(func() { commit(t, s, "b", bgtask.Upsert(rec("b", 2, bgtask.StatusRunning))) })
			}
			wg.Wait()
			if _, err := s.Get(t.Context(), statusless.ID); !errors.Is(err, bgtask.ErrNotFound) {
				t.Fatalf("Get(%s) after the rolled back commit and an update: %v, want ErrNotFound", statusless.ID, err)
			}
		})
	}
}
