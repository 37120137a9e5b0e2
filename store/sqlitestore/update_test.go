package sqlitestore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// A change to a record the store holds writes only the columns a record's
// life changes: the identity columns (and so their indexes and the tags
// trigger) are left alone, and the status only when it changes. Triggers
// on UPDATE OF a column fire when an UPDATE sets it, as SQLite's index
// upkeep does.
func TestUpdateLeavesIdentityColumns(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	m := rec("a", 1, bgtype.StatusRunning)
	m.Name, m.Tags, m.Parent.TaskID, m.IdempotencyKey = "research", []string{"web"}, "task_parent", "key-1"
	commit(t, s, "a", store.UpsertAction(m))

	db := rawDB(t, path)
	execSQL(t, db, "CREATE TABLE touched (col TEXT NOT NULL)")
	watched := []string{"owner", "task_type", "name", "description", "created_at", "parent_task_id", "detached", "tags", "idempotency_key", "status"}
	for _, c := range watched {
		execSQL(t, db, fmt.Sprintf("CREATE TRIGGER touched_%[1]s AFTER UPDATE OF %[1]s ON tasks BEGIN INSERT INTO touched VALUES ('%[1]s'); END", c))
	}
	touched := func() []string {
		t.Helper()
		rows, err := db.QueryContext(t.Context(), "SELECT col FROM touched ORDER BY rowid")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var cols []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, c)
		}
		execSQL(t, db, "DELETE FROM touched")
		return cols
	}

	progress := m
	progress.Progress = &bgtype.Progress{Done: 1, Total: 2, Message: "half"}
	done := progress
	done.Status, done.FinishedAt, done.Result = bgtype.StatusCompleted, base.Add(time.Minute), []byte(`{"ok":true}`)
	for _, step := range []struct {
		name   string
		action store.Action
		want   []string // the watched columns set
	}{
		{"progress", store.UpsertAction(progress), nil},
		{"completion", store.UpsertAction(done), []string{"status"}},
		{"announce", store.AnnounceAction(m.ID), nil},
	} {
		commit(t, s, "a", step.action)
		if got := touched(); !slices.Equal(got, step.want) {
			t.Errorf("%s set %q, want %q", step.name, got, step.want)
		}
	}
	got := get(t, s, m.ID)
	if got.Status != bgtype.StatusCompleted || !got.Announced || got.Progress == nil || got.Progress.Message != "half" ||
		string(got.Result) != `{"ok":true}` || !slices.Equal(got.Tags, m.Tags) || got.IdempotencyKey != "key-1" || got.Parent.TaskID != "task_parent" {
		t.Fatalf("record after the updates = %+v", got)
	}
}
