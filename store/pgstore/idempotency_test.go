package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// Two processes on one database spawn the same keys at once: every key has
// exactly one record and its function ran once, in one of them, and both
// processes got that record's id.
func TestIdempotentSpawnAcrossProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	const keys = 40
	a := startInstance(t, dsn, "inst-a", "alice", 0)
	b := startInstance(t, dsn, "inst-b", "alice", 0)
	type result struct {
		IDs     map[string]string `json:"ids"`
		Started []string          `json:"started"`
		Errors  []string          `json:"errors"`
	}
	cmd := fmt.Sprintf("keyed %d 8", keys)
	a.send(cmd)
	b.send(cmd)
	var res [2]result
	for i, p := range []*instance{a, b} {
		line, ok := strings.CutPrefix(p.next(), "keyed ")
		if !ok {
			t.Fatalf("%s: keyed answered %q", p.id, line)
		}
		if err := json.Unmarshal([]byte(line), &res[i]); err != nil {
			t.Fatalf("%s: %v in %s", p.id, err, line)
		}
		if len(res[i].Errors) != 0 || len(res[i].IDs) != keys {
			t.Fatalf("%s: %d ids, errors %q", p.id, len(res[i].IDs), res[i].Errors)
		}
	}
	started := append(slices.Clone(res[0].Started), res[1].Started...)
	slices.Sort(started)
	var want []string
	for i := range keys {
		want = append(want, fmt.Sprintf("key-%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(started, want) {
		t.Fatalf("functions started for keys %q, want each key once: %q", started, want)
	}
	for _, k := range want {
		if res[0].IDs[k] != res[1].IDs[k] {
			t.Errorf("%s: inst-a got %s, inst-b got %s", k, res[0].IDs[k], res[1].IDs[k])
		}
	}
	conn := sqlConn(t, dsn)
	var records, distinct int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT idempotency_key) FROM bgtask_tasks WHERE owner = 'alice' AND idempotency_key <> ''`).Scan(&records, &distinct); err != nil {
		t.Fatal(err)
	}
	if records != keys || distinct != keys {
		t.Fatalf("%d records with %d distinct keys, want %d and %d", records, distinct, keys, keys)
	}
	t.Logf("inst-a ran %d functions, inst-b %d", len(res[0].Started), len(res[1].Started))
	a.quit()
	b.quit()
}

// A database at schema version 3 (before progress and keys) opens, keeps
// its rows (with neither), stores progress, and refuses a second record
// with a key through the unique index.
func TestMigrationAddsProgressAndKeys(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	migrateTo(t, dsn, 3)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', now() - interval '1 hour')`)

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	old, err := s.Get(t.Context(), "task_old")
	if err != nil || old.Progress != nil || old.IdempotencyKey != "" {
		t.Fatalf("old record = %+v, %v; want no progress and no key", old, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(bgtype.TaskMeta{ID: "task_old", Owner: "alice", Progress: &bgtype.Progress{Done: 2, Total: 5, Message: "ünï <b>", At: at}})); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "task_old"); err != nil || got.Status != bgtype.StatusRunning || got.Progress == nil || *got.Progress != (bgtype.Progress{Done: 2, Total: 5, Message: "ünï <b>", At: at}) {
		t.Fatalf("old record after a progress update = %+v, %v", got, err)
	}
	a := bgtype.TaskMeta{ID: "task_a", Owner: "alice", Status: bgtype.StatusRunning, CreatedAt: at, IdempotencyKey: "k"}
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(a)); err != nil {
		t.Fatal(err)
	}
	b := a
	b.ID = "task_b"
	err = s.Commit(t.Context(), "alice", store.UpsertAction(b))
	if err == nil || err.Error() != `bgtask: idempotency key "k" already used by task task_a` || !errors.Is(err, bgtype.ErrDuplicateKey) {
		t.Fatalf("Commit of a second record with key k: %v", err)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_schema_migrations SET version = version`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("%d migration rows, want %d", n, pgstore.SchemaVersion)
	}
}
