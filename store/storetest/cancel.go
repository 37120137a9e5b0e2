package storetest

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// testCancelledContext: every method given a context that is already
// cancelled returns (or yields) an error matching context.Canceled, and a
// Commit so refused changes nothing.
func testCanceledContext(t *testing.T, c Config) {
	s := c.New(t)
	const owner = "owner-ctx"
	known := rec("task_known", owner, bgtype.StatusRunning, 1)
	known.Parent.TaskID = "task_p"
	commit(t, s, owner, store.UpsertAction(known))
	ctx := canceled(t)

	_, err := s.Load(ctx, owner)
	wantErr(t, "Load", err, context.Canceled)
	_, err = s.Get(ctx, known.ID)
	wantErr(t, "Get", err, context.Canceled)
	_, err, _ = collect(s.List(ctx, owner))
	wantErr(t, "List", err, context.Canceled)
	_, err, _ = collect(s.Children(ctx, "task_p"))
	wantErr(t, "Children", err, context.Canceled)

	done := ended(known, bgtype.StatusCompleted, 2)
	err = s.Commit(ctx, owner, store.UpsertAction(done), store.UpsertAction(rec("task_new", owner, bgtype.StatusQueued, 2)))
	wantErr(t, "Commit", err, context.Canceled)
	if d := diffMeta(known, get(t, s, known.ID)); d != "" {
		t.Errorf("Commit with a cancelled context changed %s:\n%s", known.ID, d)
	}
	_, err = s.Get(t.Context(), "task_new")
	wantErr(t, "Get(task_new) after a refused Commit", err, bgtask.ErrNotFound)
}
