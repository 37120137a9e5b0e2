package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// base is when the fixture's first task was created; the inspector's
// clock reads now.
var (
	base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now  = base.Add(time.Hour)
)

// at is base plus s seconds.
func at(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

// fixture is the tasks of two owners: alice's lineage three levels deep
// and bob's two unrelated tasks, with tags, runs and every kind of status.
func fixture() map[string][]bgtype.TaskMeta {
	return map[string][]bgtype.TaskMeta{
		"alice": {
			{ID: "task_root", Owner: "alice", Type: bgtype.TypeSubAgent, Name: "research", Description: "reads three sources",
				Status: bgtype.StatusCompleted, Result: json.RawMessage(`{"summary":"agree"}`),
				CreatedAt: at(1), StartedAt: at(1.01), FinishedAt: at(4.5), Instance: "inst-a", Attempt: 1,
				Parent: bgtype.Parent{RunID: "run-1", CallID: "call-1", AgentID: "agent-1"}, Tags: []string{"web"}},
			{ID: "task_child1", Owner: "alice", Type: bgtype.TypeTask, Name: "fetch", Status: bgtype.StatusFailed,
				Error: "GET https://example.com: 503", ErrorKind: bgtype.ErrorKind("error"), Stack: "goroutine 7 [running]:\nmain.fetch()\n",
				CreatedAt: at(2), StartedAt: at(2), FinishedAt: at(2.25), Instance: "inst-a",
				Parent: bgtype.Parent{TaskID: "task_root", RunID: "run-1"}, Tags: []string{"web", "http"}},
			{ID: "task_grand1", Owner: "alice", Type: bgtype.TypeTask, Name: "parse", Status: bgtype.StatusCanceled,
				CancelReason: "parent failed", CreatedAt: at(3), StartedAt: at(3), FinishedAt: at(63.4), Instance: "inst-a",
				Parent: bgtype.Parent{TaskID: "task_child1"}},
			{ID: "task_child2", Owner: "alice", Type: bgtype.TypeTask, Name: "summarize", Status: bgtype.StatusRunning,
				CreatedAt: at(5), StartedAt: at(5.5), Instance: "inst-a", Detached: true, IdempotencyKey: "summary-run-1",
				Progress: &bgtype.Progress{Done: 3, Total: 8, Message: "section\x1b[2J 3", At: at(7)},
				Parent:   bgtype.Parent{TaskID: "task_root", RunID: "run-1"}},
			{ID: "task_grand2", Owner: "alice", Type: bgtype.TypeTask, Name: "ask", Status: bgtype.StatusAwaitingInput,
				CreatedAt: at(6), StartedAt: at(6), Instance: "inst-a", Wake: bgtype.WakeOnActivity,
				Input:  &bgtype.InputRequest{ID: "input_1", Prompt: "which source first?"},
				Parent: bgtype.Parent{TaskID: "task_child2", RunID: "run-1"}},
		},
		"bob": {
			{ID: "task_bob1", Owner: "bob", Type: bgtype.TypeTask, Name: "index", Status: bgtype.StatusInterrupted,
				Error: "instance inst-b stopped", ErrorKind: bgtype.ErrorKind("interrupted"),
				CreatedAt: at(7), StartedAt: at(7), FinishedAt: at(700), Instance: "inst-b",
				Parent: bgtype.Parent{RunID: "run-2"}, Tags: []string{"db"}},
			{ID: "task_bob2", Owner: "bob", Type: bgtype.TypeTask, Name: "evil\x1b[2Jname\tx", Status: bgtype.StatusQueued,
				CreatedAt: at(8), Instance: "inst-b"},
		},
	}
}

// fill commits the fixture to st.
func fill(t *testing.T, st store.Store) {
	t.Helper()
	for owner, ms := range fixture() {
		for _, m := range ms {
			if err := st.Commit(t.Context(), owner, store.UpsertAction(m)); err != nil {
				t.Fatalf("commit %s: %v", m.ID, err)
			}
		}
	}
}

// backend is one store as the inspector reaches it.
type backend struct {
	name string
	flag []string // --db PATH or --dsn DSN
	// sum is a checksum of what the inspector must not change.
	sum func() string
}

// sqliteFixture writes the fixture to a new SQLite file, closed again.
func sqliteFixture(t *testing.T) (backend, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	st, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return backend{name: "sqlite", flag: []string{"--db", path}, sum: func() string { return sqliteSum(t, path) }}, path
}

// sqliteSum is a checksum of the file's tasks and cancel requests.
func sqliteSum(t *testing.T, path string) string {
	t.Helper()
	db := rawSQLite(t, path)
	defer db.Close()
	var out string
	for _, tab := range []string{"tasks", "task_tags", "cancel_requests"} {
		var s string
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) || ':' || coalesce(group_concat(x, '|'), '') FROM (SELECT json_array(*) AS x FROM (SELECT * FROM "+tab+" ORDER BY 1))").Scan(&s); err != nil {
			t.Fatalf("checksum %s: %v", tab, err)
		}
		out += tab + "=" + s + ";"
	}
	return out
}

// rawSQLite opens the file as another program would.
func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func sqliteExec(t *testing.T, path, query string) {
	t.Helper()
	db := rawSQLite(t, path)
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// pgFixture writes the fixture to a new PostgreSQL schema.
func pgFixture(t *testing.T) (backend, string) {
	t.Helper()
	dsn := pgtest.NewDSN(t)
	st, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return backend{name: "postgres", flag: []string{"--dsn", dsn}, sum: func() string { return pgSum(t, dsn) }}, dsn
}

// pgSum is a checksum of the tasks (their rows and versions) and the
// cancel requests.
func pgSum(t *testing.T, dsn string) string {
	t.Helper()
	var s string
	pgScan(t, dsn, `SELECT (SELECT count(*) || ':' || coalesce(max(version), 0) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY id)), '') FROM bgtask_tasks t)
		|| '/' || (SELECT count(*) FROM bgtask_cancel_requests)`, &s)
	return s
}

func pgScan(t *testing.T, dsn, query string, dest ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), query).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func pgExec(t *testing.T, dsn, query string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// result is what one run of the inspector wrote and returned.
type result struct {
	code           int
	stdout, stderr string
}

// testEnv is the inspector's env with the fixture's clock, no environment
// variables, stdout not a terminal, and a ticker that has ticked ticks
// times already.
func testEnv(stdout, stderr *bytes.Buffer, terminal bool, ticks int) *env {
	e := defaultEnv(stdout, stderr)
	e.getenv = func(string) string { return "" }
	e.now = func() time.Time { return now }
	e.terminal = func(io.Writer) bool { return terminal }
	e.tick = func(time.Duration) (<-chan time.Time, func()) {
		c := make(chan time.Time, ticks)
		for i := range ticks {
			c <- now.Add(time.Duration(i+1) * time.Second)
		}
		return c, func() {}
	}
	return e
}

// inspect runs the inspector with args in the test's env.
func inspect(t *testing.T, e func(stdout, stderr *bytes.Buffer) *env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if e == nil {
		e = func(o, x *bytes.Buffer) *env { return testEnv(o, x, false, 0) }
	}
	code := e(&stdout, &stderr).run(t.Context(), args)
	return result{code, stdout.String(), stderr.String()}
}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: output differs from %s\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// strip replaces the store-specific parts of a text (a path, a DSN) with a
// placeholder, so one golden file serves both stores.
func strip(s string, b backend) string {
	return strings.ReplaceAll(s, b.flag[1], "STORE")
}
