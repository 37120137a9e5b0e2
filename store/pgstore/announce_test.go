package pgstore_test

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// announcedVersion is the schema version that added the announced column.
const announcedVersion = 5

// A database of the version before the announcement marks opens, keeps its
// terminal rows unannounced, and then stores a mark on terminal rows only.
func TestMigrationAddsAnnounced(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, announcedVersion-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, finished_at, terminal_at)
		VALUES ('task_old', 'alice', 'completed', now() - interval '1 hour', now(), now()),
		       ('task_live', 'alice', 'running', now() - interval '1 hour', NULL, NULL)`)

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	old, err := s.Get(t.Context(), "task_old")
	if err != nil || old.Status != bgtype.StatusCompleted || old.Announced {
		t.Fatalf("old record = %+v, %v; want completed, not announced", old, err)
	}
	if err := s.Commit(t.Context(), "alice", store.AnnounceAction("task_old", "task_live")); err != nil {
		t.Fatal(err)
	}
	var announced []string
	for m, err := range s.List(t.Context(), "alice") {
		if err != nil {
			t.Fatal(err)
		}
		if m.Announced {
			announced = append(announced, m.ID)
		}
	}
	if len(announced) != 1 || announced[0] != "task_old" {
		t.Errorf("announced = %q, want [task_old]", announced)
	}
}
