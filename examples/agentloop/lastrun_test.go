package main

import (
	"context"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// The summary counts the tasks of the latest runtime instance only, the
// descendants of the owner's tasks included, and calls a task still
// recorded running (its process is gone) interrupted.
func TestLastRunSummary(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	rec := func(id, owner, parent, instance string, status bgtype.Status, minute int) bgtype.TaskMeta {
		return bgtype.TaskMeta{ID: id, Owner: owner, Name: id, Status: status, Instance: instance,
			CreatedAt: t0.Add(time.Duration(minute) * time.Minute), Parent: bgtype.Parent{TaskID: parent}}
	}
	for _, tc := range []struct {
		name  string
		tasks []bgtype.TaskMeta
		want  string
	}{
		{"empty", nil, ""},
		{"one", []bgtype.TaskMeta{rec("a", "lead", "", "i1", bgtype.StatusCompleted, 1)}, "last run: 1 task: 1 completed"},
		{"killed", []bgtype.TaskMeta{
			rec("old", "lead", "", "i0", bgtype.StatusRunning, 0), // an earlier instance: not counted
			rec("r1", "lead", "", "i1", bgtype.StatusCompleted, 1),
			rec("r1p", "r1", "r1", "i1", bgtype.StatusCompleted, 2),
			rec("r1b", "r1", "r1", "i1", bgtype.StatusCompleted, 2),
			rec("r2", "lead", "", "i1", bgtype.StatusCanceled, 3),
			rec("r2p", "r2", "r2", "i1", bgtype.StatusRunning, 4),
			rec("ix", "lead", "", "i1", bgtype.StatusCompleted, 5),
			rec("ix2", "lead", "", "i1", bgtype.StatusCompleted, 6),
			rec("other", "someone", "", "i1", bgtype.StatusFailed, 7), // another owner: not counted
		}, "last run: 7 tasks: 5 completed, 1 cancelled, 1 interrupted (killed while running)"},
		{"all statuses", []bgtype.TaskMeta{
			rec("a", "lead", "", "i1", bgtype.StatusInterrupted, 1),
			rec("b", "lead", "", "i1", bgtype.StatusQueued, 2),
			rec("c", "lead", "", "i1", bgtype.StatusFailed, 3),
			rec("d", "lead", "", "i1", bgtype.StatusAwaitingInput, 4),
		}, "last run: 4 tasks: 1 failed, 3 interrupted (killed while running)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := bgtask.New()
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := m.Shutdown(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			for _, meta := range tc.tasks {
				if err := m.Store().Commit(t.Context(), meta.Owner, store.UpsertAction(meta)); err != nil {
					t.Fatal(err)
				}
			}
			tasks, err := storedTasks(t.Context(), m, "lead")
			if err != nil {
				t.Fatal(err)
			}
			if got := summarizeLast(tasks); got != tc.want {
				t.Fatalf("summary %q, want %q", got, tc.want)
			}
		})
	}
}
