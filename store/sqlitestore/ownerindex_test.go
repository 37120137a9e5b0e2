package sqlitestore_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// ownerIndexVersion is the schema version that replaced tasks_owner_status
// and the partial tasks_owner_terminal with one index of all of an owner's
// records, under the name tasks_owner_terminal.
const ownerIndexVersion = 7

// A database of the version before the one owner index, with live, terminal,
// tagged, keyed and unannounced records of two owners, opens, migrates to
// one owner index, keeps every record as it was, and the store works on
// it: the owner's records, its tag and status filters, its undelivered
// owners, the idempotency key, and the count limit, which deletes exactly
// the oldest terminal records by the new index.
func TestMigrationOneOwnerIndex(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, ownerIndexVersion-1)
	now := time.Now().UnixMicro() // age retention keeps them
	execSQL(t, db, `INSERT INTO tasks (id, owner, status, created_at, finished_at, terminal_seq, terminal_at, announced, tags, idempotency_key) VALUES
		('task_a1', 'alice', 'completed', ?1 + 1, ?1, 1, ?1, 1, '[]', ''),
		('task_a2', 'alice', 'failed', ?1 + 2, ?1, 2, ?1, 1, '["x"]', ''),
		('task_a3', 'alice', 'completed', ?1 + 3, ?1, 3, ?1, 1, '[]', ''),
		('task_a4', 'alice', 'running', ?1 + 4, NULL, NULL, NULL, 0, '["x"]', 'key-1'),
		('task_b1', 'bob', 'completed', ?1 + 5, ?1, 4, ?1, 0, '[]', '')`, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A process of the previous version, still open on the file, has
	// prepared its query of undelivered owners, which forces the index by
	// name.
	old, err := rawDB(t, path).PrepareContext(t.Context(), `SELECT DISTINCT owner FROM tasks INDEXED BY tasks_owner_terminal
		WHERE terminal_seq IS NOT NULL AND announced = 0 AND wake <> 'silent'`)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	s := openAt(t, path, sqlitestore.WithoutRecovery(), sqlitestore.WithRetainPerOwner(2))
	var version int
	raw := rawDB(t, path)
	if err := raw.QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version); err != nil || version != sqlitestore.SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, sqlitestore.SchemaVersion)
	}
	if got, want := taskIndexes(t, path), []string{"tasks_idempotency", "tasks_owner_terminal", "tasks_parent", "tasks_terminal_at", "tasks_waiting"}; !slices.Equal(got, want) {
		t.Fatalf("indexes %q, want %q", got, want)
	}
	// All of an owner's records, so that it replaces tasks_owner_status;
	// the name is the previous version's, whose query forces it.
	var def string
	if err := raw.QueryRowContext(t.Context(), "SELECT sql FROM sqlite_master WHERE name = 'tasks_owner_terminal'").Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := "CREATE INDEX tasks_owner_terminal ON tasks (owner, terminal_seq)"; def != want {
		t.Fatalf("tasks_owner_terminal is %q, want %q", def, want)
	}
	wantIDs(t, "List(alice)", ids(t, s, "alice"), []string{"task_a1", "task_a2", "task_a3", "task_a4"})
	wantIDs(t, "List(alice, completed)", ids(t, s, "alice", bgtype.StatusCompleted), []string{"task_a1", "task_a3"})
	wantIDs(t, "List(bob)", ids(t, s, "bob"), []string{"task_b1"})
	var tagged []string
	for m, err := range s.ListTagged(t.Context(), "alice", "x") {
		if err != nil {
			t.Fatal(err)
		}
		tagged = append(tagged, m.ID)
	}
	wantIDs(t, "ListTagged(alice, x)", tagged, []string{"task_a2", "task_a4"})
	var undelivered []string
	for o, err := range s.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		undelivered = append(undelivered, o)
	}
	wantIDs(t, "UndeliveredOwners", undelivered, []string{"bob"})
	var oldOwner string
	if err := old.QueryRowContext(t.Context()).Scan(&oldOwner); err != nil || oldOwner != "bob" {
		t.Fatalf("the previous version's query after the migration: %q (%v), want bob", oldOwner, err)
	}

	// The live record ends: alice then holds 4 terminal records, over the
	// limit of 2, and loses exactly her 2 oldest.
	m := get(t, s, "task_a4")
	m.Status, m.FinishedAt = bgtype.StatusCompleted, time.Now().UTC().Truncate(time.Microsecond)
	commit(t, s, "alice", store.UpsertAction(m))
	wantIDs(t, "List(alice) after the completion", ids(t, s, "alice"), []string{"task_a3", "task_a4"})
	wantIDs(t, "List(bob) after alice's completion", ids(t, s, "bob"), []string{"task_b1"})

	// The idempotency key still names one record.
	dup := bgtype.TaskMeta{ID: "task_a5", Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusRunning,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond), IdempotencyKey: "key-1"}
	err = s.Commit(t.Context(), "alice", store.UpsertAction(dup))
	wantErr(t, "Commit of a duplicate key", err, (&bgtype.DuplicateKeyError{Key: "key-1", TaskID: "task_a4"}).Error())
}

// Two Stores opening one file of the previous version at once (two
// processes of an overlapping restart) both open it: one migrates it, in
// its immediate transaction, and the other finds it migrated; both then
// read every record and each other's commits.
func TestMigrationTwoOpensAtOnce(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	db := dbAtVersion(t, path, ownerIndexVersion-1)
	now := time.Now().UnixMicro()
	execSQL(t, db, `INSERT INTO tasks (id, owner, status, created_at, finished_at, terminal_seq, terminal_at, announced) VALUES
		('task_a1', 'alice', 'completed', ?1, ?1, 1, ?1, 1),
		('task_a2', 'alice', 'running', ?1 + 1, NULL, NULL, NULL, 0)`, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	stores := make([]*sqlitestore.Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = sqlitestore.Open(t.Context(), path, sqlitestore.WithoutRecovery()) })
	}
	wg.Wait()
	for i, s := range stores {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
	}
	if got, want := taskIndexes(t, path), []string{"tasks_idempotency", "tasks_owner_terminal", "tasks_parent", "tasks_terminal_at", "tasks_waiting"}; !slices.Equal(got, want) {
		t.Fatalf("indexes %q, want %q", got, want)
	}
	commit(t, stores[0], "bob", store.UpsertAction(rec("bob", 1, bgtype.StatusRunning)))
	commit(t, stores[1], "bob", store.UpsertAction(rec("bob", 2, bgtype.StatusCompleted)))
	for i, s := range stores {
		wantIDs(t, fmt.Sprintf("store %d: List(alice)", i), ids(t, s, "alice"), []string{"task_a1", "task_a2"})
		wantIDs(t, fmt.Sprintf("store %d: List(bob)", i), ids(t, s, "bob"), idsOf("bob", 1, 2))
	}
}

// taskIndexes lists the names of the indexes on tasks that the schema made.
func taskIndexes(t *testing.T, path string) []string {
	t.Helper()
	rows, err := rawDB(t, path).QueryContext(t.Context(), "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
