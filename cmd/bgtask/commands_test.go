package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// Each read command's exact output on the fixture, the same on both
// stores, and none of them changes anything in the store.
func TestReadCommands(t *testing.T) {
	cases := []struct {
		golden string
		args   []string
		e      func(o, x *bytes.Buffer) *env
	}{
		{"ls", []string{"ls"}, nil},
		{"ls_owner", []string{"ls", "--owner", "bob"}, nil},
		{"ls_status", []string{"ls", "--status", "running,awaiting_input,interrupted"}, nil},
		{"ls_tag", []string{"ls", "--tag", "web"}, nil},
		{"ls_run", []string{"ls", "--run", "run-1", "--owner", "alice"}, nil},
		{"ls_none", []string{"ls", "--owner", "carol"}, nil},
		{"ls_json", []string{"ls", "--json", "--owner", "bob"}, nil},
		{"tree_grand", []string{"tree", "task_grand1"}, nil},
		{"tree_root", []string{"tree", "task_root"}, nil},
		{"tree_single", []string{"tree", "task_bob1"}, nil},
		{"show_failed", []string{"show", "task_child1"}, nil},
		{"show_input", []string{"show", "task_grand2"}, nil},
		{"show_progress", []string{"show", "task_child2"}, nil},
		{"show_json", []string{"show", "--json", "task_bob2"}, nil},
		{"watch_plain", []string{"watch", "--count", "3", "--status", "running,queued"}, watchEnv(false, 2, 2*time.Second)},
		{"watch_terminal", []string{"watch", "--count", "2", "--owner", "bob", "--interval", "5s"}, watchEnv(true, 1, 5*time.Second)},
	}
	for _, mk := range []func(*testing.T) (backend, string){sqliteFixture, pgFixture} {
		b, _ := mk(t)
		t.Run(b.name, func(t *testing.T) {
			before := b.sum()
			for _, tc := range cases {
				// Flags after the positional argument too.
				args := append(append([]string{}, tc.args...), b.flag...)
				r := inspect(t, tc.e, args...)
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("%q: exit %d, stderr %q", tc.args, r.code, r.stderr)
				}
				golden(t, tc.golden, r.stdout)
			}
			if after := b.sum(); after != before {
				t.Fatalf("reading changed the store:\n%s\n%s", before, after)
			}
		})
	}
}

// watchEnv is the test env of a watch whose clock moves on by step at each
// reading, as the ticks come.
func watchEnv(terminal bool, ticks int, step time.Duration) func(o, x *bytes.Buffer) *env {
	return func(o, x *bytes.Buffer) *env {
		e := testEnv(o, x, terminal, ticks)
		t := now
		e.now = func() time.Time {
			defer func() { t = t.Add(step) }()
			return t
		}
		return e
	}
}

// The store may be named by the environment; flags win over it.
func TestStoreFromEnvironment(t *testing.T) {
	b, path := sqliteFixture(t)
	envWith := func(vars map[string]string) func(o, x *bytes.Buffer) *env {
		return func(o, x *bytes.Buffer) *env {
			e := testEnv(o, x, false, 0)
			e.getenv = func(k string) string { return vars[k] }
			return e
		}
	}
	r := inspect(t, envWith(map[string]string{"BGTASK_DB": path}), "ls", "--owner", "bob")
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("BGTASK_DB: %+v", r)
	}
	want := r.stdout
	r = inspect(t, envWith(map[string]string{"BGTASK_DSN": "postgres://nowhere.invalid/x"}), append([]string{"ls", "--owner", "bob"}, b.flag...)...)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("--db over BGTASK_DSN: %+v", r)
	}
	r = inspect(t, envWith(map[string]string{"BGTASK_DB": path, "BGTASK_DSN": "postgres://nowhere.invalid/x"}), "ls")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "bgtask ls: give one of --db and --dsn (or BGTASK_DB and BGTASK_DSN), not both\nusage: bgtask ls [flags]\n") {
		t.Fatalf("both: %+v", r)
	}
}

// Usage errors: exit status 2 and the usage on stderr, nothing on stdout.
func TestUsageErrors(t *testing.T) {
	b, _ := sqliteFixture(t)
	cases := []struct {
		name   string
		args   []string
		stderr string // its first line
	}{
		{"no command", nil, "usage: bgtask <command> [flags] [ID]"},
		{"unknown command", []string{"rm", "task_root"}, `bgtask: unknown command "rm"`},
		{"unknown flag", append([]string{"ls", "--bogus"}, b.flag...), "flag provided but not defined: -bogus"},
		{"flag without value", []string{"ls", "--owner"}, "flag needs an argument: -owner"},
		{"tree without id", append([]string{"tree"}, b.flag...), "bgtask tree: want one task id, got 0 arguments"},
		{"show with two ids", append([]string{"show", "a", "b"}, b.flag...), "bgtask show: want one task id, got 2 arguments"},
		{"ls with an argument", append([]string{"ls", "x"}, b.flag...), `bgtask ls: unexpected argument "x"`},
		{"unknown status", append([]string{"ls", "--status", "running,done"}, b.flag...), `bgtask ls: unknown status "done" (want queued, running, awaiting_input, completed, failed, cancelled, interrupted)`},
		{"no store", []string{"ls"}, "bgtask ls: no store: give --db PATH or --dsn DSN (or set BGTASK_DB or BGTASK_DSN)"},
		{"both stores", []string{"ls", "--db", "x.db", "--dsn", "postgres://x/y"}, "bgtask ls: give one of --db and --dsn (or BGTASK_DB and BGTASK_DSN), not both"},
		{"bad interval", append([]string{"watch", "--interval", "0s"}, b.flag...), "bgtask watch: --interval must be positive and --count not negative"},
	}
	for _, tc := range cases {
		r := inspect(t, nil, tc.args...)
		first, _, _ := bytes.Cut([]byte(r.stderr), []byte("\n"))
		if r.code != 2 || string(first) != tc.stderr || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr first line %q; want 2, \"\", %q", tc.name, r.code, r.stdout, first, tc.stderr)
		}
		if tc.args != nil && !bytes.Contains([]byte(r.stderr), []byte("usage: bgtask ")) {
			t.Errorf("%s: no usage on stderr: %q", tc.name, r.stderr)
		}
	}
	if r := inspect(t, nil, "ls", "-h"); r.code != 0 || r.stdout != "" || !bytes.HasPrefix([]byte(r.stderr), []byte("usage: bgtask ls [flags]\n")) {
		t.Errorf("ls -h: %+v", r)
	}
}

// Failures: exit status 1 and one line on stderr that says what failed.
func TestErrors(t *testing.T) {
	sb, path := sqliteFixture(t)
	pb, dsn := pgFixture(t)
	dir := t.TempDir()
	newerDB, olderDB := dir+"/newer.db", dir+"/older.db"
	for _, p := range []string{newerDB, olderDB} {
		b, _ := sqliteFixture(t)
		sqliteExec(t, b.flag[1], "VACUUM INTO '"+p+"'")
	}
	sqliteExec(t, newerDB, "PRAGMA user_version = 99")
	sqliteExec(t, olderDB, fmt.Sprintf("PRAGMA user_version = %d", sqlitestore.SchemaVersion-1))
	newerPG, _ := pgFixture(t)
	pgExec(t, newerPG.flag[1], "INSERT INTO bgtask_schema_migrations (version) VALUES (99)")
	olderPG, _ := pgFixture(t)
	pgExec(t, olderPG.flag[1], fmt.Sprintf("DELETE FROM bgtask_schema_migrations WHERE version = %d", pgstore.SchemaVersion))
	missing := dir + "/missing.db"
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing file", []string{"ls", "--db", missing},
			fmt.Sprintf("bgtask: sqlitestore: open %s: stat %s: no such file or directory\n", missing, missing)},
		{"newer sqlite", []string{"ls", "--db", newerDB},
			fmt.Sprintf("bgtask: sqlitestore: open %s: sqlitestore: database schema is newer than this code: database schema version 99, this code knows up to %d\n", newerDB, sqlitestore.SchemaVersion)},
		{"older sqlite", []string{"ls", "--db", olderDB},
			fmt.Sprintf("bgtask: sqlitestore: open %s: sqlitestore: database schema is older than this code: schema version %d, this code reads %d; run the application once to migrate it\n", olderDB, sqlitestore.SchemaVersion-1, sqlitestore.SchemaVersion)},
		{"bad dsn", []string{"ls", "--dsn", "postgres://u:secret@localhost:notaport/db"},
			"bgtask: pgstore: cannot parse `postgres://u:xxxxx@localhost:notaport/db`: invalid port\n"},
		{"newer postgres", append([]string{"ls"}, newerPG.flag...),
			fmt.Sprintf("bgtask: pgstore: database schema is newer than this code: database is at schema version 99, this code knows versions up to %d; upgrade the code\n", pgstore.SchemaVersion)},
		{"older postgres", append([]string{"ls"}, olderPG.flag...),
			fmt.Sprintf("bgtask: pgstore: database schema is older than this code: database is at schema version %d, this code reads %d; run the application once to migrate it\n", pgstore.SchemaVersion-1, pgstore.SchemaVersion)},
		{"show unknown sqlite", []string{"show", "task_none", "--db", path}, "bgtask: no task task_none\n"},
		{"tree unknown sqlite", []string{"tree", "task_none", "--db", path}, "bgtask: no task task_none\n"},
		{"cancel unknown sqlite", []string{"cancel", "task_none", "--db", path}, "bgtask: no task task_none\n"},
		{"show unknown postgres", []string{"show", "task_none", "--dsn", dsn}, "bgtask: no task task_none\n"},
		{"tree unknown postgres", []string{"tree", "task_none", "--dsn", dsn}, "bgtask: no task task_none\n"},
		{"cancel unknown postgres", []string{"cancel", "task_none", "--dsn", dsn}, "bgtask: no task task_none\n"},
	}
	for _, tc := range cases {
		r := inspect(t, nil, tc.args...)
		if r.code != 1 || r.stderr != tc.stderr || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1, \"\", %q", tc.name, r.code, r.stdout, r.stderr, tc.stderr)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing file was created: %v", err)
	}
	// An unreachable server: the error names the connection; its exact
	// text is the driver's.
	if r := inspect(t, nil, "ls", "--dsn", "postgres://u@127.0.0.1:1/db?connect_timeout=5"); r.code != 1 || !strings.HasPrefix(r.stderr, "bgtask: pgstore: read schema version: failed to connect to `user=u database=db`") {
		t.Errorf("unreachable server: %+v", r)
	}
	// Cancelling an ended task changes nothing and says so.
	for _, b := range []backend{sb, pb} {
		before := b.sum()
		r := inspect(t, nil, append([]string{"cancel", "--tree", "task_root"}, b.flag...)...)
		if r.code != 0 || r.stdout != "task task_root already completed: nothing to cancel\n" || r.stderr != "" {
			t.Errorf("%s: cancel ended: %+v", b.name, r)
		}
		if after := b.sum(); after != before {
			t.Errorf("%s: cancelling an ended task changed the store", b.name)
		}
	}
}
