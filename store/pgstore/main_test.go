package pgstore_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	parallelDefault()
	goleak.VerifyTestMain(cleanup{pgtest.Wrap(m)})
}

// minParallel is how many tests run at once when -parallel is not given.
// The tests mostly wait (on the server, on other processes, on each
// other's instances), not compute, so GOMAXPROCS (go test's default, 2 on a
// 2-core machine) would leave the machine idle: 8 cut the package from 133
// s to 50 s on 2 cores (decision 782). Each test has a database of its own
// (pgtest), so they do not see each other.
const minParallel = 8

// parallelDefault raises -parallel to minParallel unless it was given.
func parallelDefault() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if p := flag.Lookup("test.parallel"); !given && p != nil && p.Value.String() != "" {
		if n, err := strconv.Atoi(p.Value.String()); err == nil && n < minParallel {
			p.Value.Set(strconv.Itoa(minParallel))
		}
	}
}

// openStore opens a Store on a fresh database and closes it when the test
// ends. It returns the database's DSN too.
func openStore(t *testing.T, opts ...pgstore.Option) (*pgstore.Store, string) {
	t.Helper()
	return openStoreDSN(t, "", opts...)
}

// openStoreDSN is openStore with params (such as "pool_max_conns=2")
// added to the Store's DSN; the DSN returned has none.
func openStoreDSN(t *testing.T, params string, opts ...pgstore.Option) (*pgstore.Store, string) {
	t.Helper()
	dsn := pgtest.NewDSN(t)
	open := dsn
	if params != "" {
		open += "&" + params
	}
	s, err := pgstore.Open(t.Context(), open, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, dsn
}

// openMore opens another Store on dsn (a database's, from openStore) with
// params added (none when params is empty), closed when the test ends.
func openMore(t *testing.T, dsn, params string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	if params != "" {
		dsn += "&" + params
	}
	s, err := pgstore.Open(t.Context(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// upserter returns a func that commits a record to a Store as an upsert
// of its owner's, with ctx.
func upserter(ctx context.Context) func(*pgstore.Store, bgtype.TaskMeta) error {
	return func(s *pgstore.Store, m bgtype.TaskMeta) error { return s.Commit(ctx, m.Owner, store.UpsertAction(m)) }
}

// sqlExec runs statements on a connection of its own.
func sqlExec(t testing.TB, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// hangGuard bounds every wait of the tests. It only turns a hang into a
// failure: no outcome depends on it, so it is far longer than any wait a
// loaded machine can need.
const hangGuard = 2 * time.Minute

// sqlConn opens a connection closed when the test ends.
func sqlConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// sqlScan runs a query that returns one row on a connection of its own
// and scans the row into dest.
func sqlScan(t *testing.T, dsn, sql string, dest ...any) {
	t.Helper()
	sqlScanArgs(t, dsn, sql, nil, dest...)
}

// sqlScanArgs is sqlScan with query arguments.
func sqlScanArgs(t *testing.T, dsn, sql string, args []any, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitFor checks cond on every tick until it holds, failing after
// hangGuard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := waitUntil(what, cond); err != nil {
		t.Fatal(err)
	}
}

// waitUntil is waitFor that returns its failure, for a goroutine other
// than the test's.
func waitUntil(what string, cond func() bool) error {
	deadline := time.NewTimer(hangGuard)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return fmt.Errorf("not within %v: %s", hangGuard, what)
		case <-tick.C:
		}
	}
	return nil
}

// cleanup removes the built helper after the tests.
type cleanup struct{ m interface{ Run() int } }

func (c cleanup) Run() int {
	defer removeHelper()
	return c.m.Run()
}

// migrateTo makes dsn's schema a database of schema version v, as a Store
// of that version left it: migrations 1 to v applied and recorded.
func migrateTo(t *testing.T, dsn string, v int) {
	t.Helper()
	sqlExec(t, dsn, `CREATE TABLE bgtask_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	for n := 1; n <= v; n++ {
		sqlExec(t, dsn, pgstore.MigrationSQL(n))
		sqlExec(t, dsn, `INSERT INTO bgtask_schema_migrations (version) VALUES ($1)`, n)
	}
}

// background runs a test's calls that must wait (a commit behind a held
// row, say) on goroutines of their own while the test goes on, and keeps
// their errors. The zero value is ready; wait reports the errors on t.
type background struct {
	wg   sync.WaitGroup
	mu   sync.Mutex // guards errs
	errs []error
}

// run calls f on a goroutine of its own; its error is kept, named what.
func (bg *background) run(what string, f func() error) {
	bg.wg.Go(func() {
		if err := f(); err != nil {
			bg.mu.Lock()
			bg.errs = append(bg.errs, fmt.Errorf("%s: %w", what, err))
			bg.mu.Unlock()
		}
	})
}

// wait waits for every call run started and fails t with each error.
func (bg *background) wait(t *testing.T) {
	t.Helper()
	bg.wg.Wait()
	bg.mu.Lock()
	defer bg.mu.Unlock()
	for _, err := range bg.errs {
		t.Error(err)
	}
	bg.errs = nil
}

// reapN reaps with s until n tasks were reaped in all, and fails if more
// were. A pass leaves an instance, or a task, whose row another
// transaction holds at that moment (SKIP LOCKED): a killed instance that
// still runs, as a zombie does, fences its commits and claim passes on its
// row, so a pass can find it busy; the next pass takes it.
func reapN(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	total := 0
	waitFor(t, fmt.Sprintf("%d tasks reaped", n), func() bool {
		got, err := s.Reap(t.Context())
		if err != nil {
			t.Fatalf("Reap: %v", err)
		}
		total += got
		return total >= n
	})
	if total != n {
		t.Fatalf("reaped %d tasks, want %d", total, n)
	}
}
