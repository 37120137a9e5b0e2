package sqlitestore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// A database at schema version 1 (before tags) opens, gets the tags column
// and index, keeps its rows (with no tags), and filters new records by tag.
func TestMigrationAddsTags(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := rawDB(t, path)
	execSQL(t, db, sqlitestore.MigrationSQL(1))
	execSQL(t, db, "PRAGMA user_version = 1")
	execSQL(t, db, "INSERT INTO tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', 1)")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path, sqlitestore.WithoutRecovery()) // the old record stays running
	old := get(t, s, "task_old")
	if old.Status != bgtype.StatusRunning || old.Tags != nil {
		t.Fatalf("old record = %+v, want running without tags", old)
	}
	m := rec("alice", 2, bgtype.StatusRunning)
	m.Tags = []string{"eu", "deploy"}
	commit(t, s, "alice", store.UpsertAction(m))
	for _, tc := range []struct {
		tag  string
		want []string
	}{{"eu", []string{m.ID}}, {"", []string{"task_old", m.ID}}, {"none", nil}} {
		var got []string
		for meta, err := range s.ListTagged(t.Context(), "alice", tc.tag) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, meta.ID)
		}
		wantIDs(t, "ListTagged("+tc.tag+")", got, tc.want)
	}
	if got := get(t, s, m.ID).Tags; !slices.Equal(got, m.Tags) {
		t.Errorf("Tags = %q, want %q", got, m.Tags)
	}
	var version int
	if err := rawDB(t, path).QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil || version != sqlitestore.SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, sqlitestore.SchemaVersion)
	}
}

// The tag filter reads the task_tags index, and retention and removes take
// the index rows with the records.
func TestTagIndex(t *testing.T) {
	t.Parallel()
	s, path := open(t, sqlitestore.WithRetainPerOwner(1))
	for n := range 3 {
		m := rec("alice", n, bgtype.StatusCompleted)
		m.Tags = []string{"t"}
		commit(t, s, "alice", store.UpsertAction(m))
	}
	db := rawDB(t, path)
	var count int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM task_tags").Scan(&count); err != nil || count != 1 {
		t.Fatalf("task_tags holds %d rows (%v), want 1 (retention keeps one record)", count, err)
	}
	commit(t, s, "alice", store.RemoveAction("task_alice_02"))
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM task_tags").Scan(&count); err != nil || count != 0 {
		t.Fatalf("task_tags holds %d rows (%v) after Remove, want 0", count, err)
	}
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN SELECT id FROM tasks WHERE owner = ? AND id IN (SELECT task_id FROM task_tags WHERE owner = ?1 AND tag = ?) AND status IN (?)", "alice", "t", "running")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "task_tags USING PRIMARY KEY") && !strings.Contains(text, "task_tags USING COVERING INDEX") || strings.Contains(text, "SCAN task_tags") {
		t.Errorf("plan does not read the tag index:\n%s", text)
	}
}
