package pgstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A database at schema version 2 (before tags) opens, gets the tags column
// and its GIN index, keeps its rows (with no tags), and filters new
// records by tag.
func TestMigrationAddsTags(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, 2)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', now() - interval '1 hour')`)

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	old, err := s.Get(t.Context(), "task_old")
	if err != nil || old.Status != bgtype.StatusRunning || old.Tags != nil {
		t.Fatalf("old record = %+v, %v; want running without tags", old, err)
	}
	m := bgtype.TaskMeta{ID: "task_new", Owner: "alice", Status: bgtype.StatusRunning, CreatedAt: time.Now().UTC(), Tags: []string{"eu", "deploy"}}
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag  string
		want []string
	}{{"eu", []string{"task_new"}}, {"", []string{"task_old", "task_new"}}, {"none", nil}} {
		var got []string
		for meta, err := range s.ListTagged(t.Context(), "alice", tc.tag) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, meta.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListTagged(%q) = %v, want %v", tc.tag, got, tc.want)
		}
	}
	if got, err := s.Get(t.Context(), "task_new"); err != nil || !slices.Equal(got.Tags, m.Tags) {
		t.Errorf("Tags = %q (%v), want %q", got.Tags, err, m.Tags)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM pg_indexes WHERE indexname = 'bgtask_tasks_tags' AND indexdef LIKE '%USING gin (tags)%'`); n != 1 {
		t.Errorf("no GIN index bgtask_tasks_tags")
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_schema_migrations SET version = version`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("%d migration rows, want %d", n, pgstore.SchemaVersion)
	}
}
