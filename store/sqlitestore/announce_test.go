package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// announcedVersion is the schema version that added the announced column.
const announcedVersion = 5

// A database of the version before the announcement marks opens, keeps its
// terminal rows unannounced, and then stores and keeps a mark across a
// reopen.
func TestMigrationAddsAnnounced(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, announcedVersion-1)
	now := time.Now().UnixMicro() // age retention keeps it
	execSQL(t, db, `INSERT INTO tasks (id, owner, status, created_at, finished_at, terminal_seq, terminal_at)
		VALUES ('task_old', 'alice', 'completed', ?1, ?1, 1, ?1), ('task_live', 'alice', 'running', ?1, NULL, NULL, NULL)`, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path, sqlitestore.WithoutRecovery())
	if got := get(t, s, "task_old"); got.Status != bgtype.StatusCompleted || got.Announced {
		t.Fatalf("old record = %s announced=%v, want completed, not announced", got.Status, got.Announced)
	}
	commit(t, s, "alice", store.AnnounceAction("task_old", "task_live"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, sqlitestore.WithoutRecovery())
	if got := get(t, s, "task_old"); !got.Announced {
		t.Errorf("task_old not announced after Announce and a reopen")
	}
	if got := get(t, s, "task_live"); got.Announced {
		t.Errorf("task_live (running) announced")
	}
}

// Version 6 drops tasks_unannounced, which no query used, and keeps the
// rows and their marks.
func TestMigrationDropsUnannouncedIndex(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, announcedVersion)
	now := time.Now().UnixMicro()
	execSQL(t, db, `INSERT INTO tasks (id, owner, status, created_at, finished_at, terminal_seq, terminal_at, announced)
		VALUES ('task_old', 'alice', 'completed', ?1, ?1, 1, ?1, 1), ('task_new', 'alice', 'failed', ?1, ?1, 2, ?1, 0)`, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path, sqlitestore.WithoutRecovery())
	if got := get(t, s, "task_old"); !got.Announced {
		t.Errorf("task_old not announced after the migration")
	}
	if got := get(t, s, "task_new"); got.Announced || got.Status != bgtype.StatusFailed {
		t.Errorf("task_new = %s announced=%v, want failed, not announced", got.Status, got.Announced)
	}
	var n int
	if err := rawDB(t, path).QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_master WHERE name = 'tasks_unannounced'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("tasks_unannounced: %d (%v), want gone", n, err)
	}
}
