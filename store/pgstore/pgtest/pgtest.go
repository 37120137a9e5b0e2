// Package pgtest is a test helper, not part of the store: it runs a
// throw-away PostgreSQL server for tests, this module's and those of the
// modules built on pgstore: initdb in a temporary directory, a postgres
// process on a free 127.0.0.1 port, and a fresh schema per test, in a
// database no other running test uses. When BGTASK_PG_DSN is set, that
// server is used instead and nothing is started.
//
// PostgreSQL refuses to run as root, so when the tests run as root the
// server runs as the "postgres" user (its temporary directory is given to
// that user). It installs nothing: ./test.sh installs the postgresql package
// when the server binaries are missing.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvDSN names the environment variable that points the tests at an
// existing server (a DSN whose user may create databases).
const EnvDSN = "BGTASK_PG_DSN"

// Server is a running PostgreSQL server.
type Server struct {
	// DSN connects to the server's maintenance database as a superuser.
	DSN string

	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *syncBuffer

	mu      sync.Mutex
	free    []string // databases no schema uses
	all     []string // every database CreateSchema created
	created int      // databases named so far
}

var (
	current *Server
	dbSeq   atomic.Int64
)

// Wrap returns m (a *testing.M) wrapped so that its Run starts a
// throw-away server first (or uses BGTASK_PG_DSN) and stops it after the
// tests. Use it from TestMain:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
//
// A server that cannot start fails the binary with the reason. The one
// exception is a machine with no server binaries and no BGTASK_PG_DSN
// outside CI (CI is not "true"): then one line says the tests are skipped,
// and none runs. Under CI that fails too, so a CI run never passes by
// skipping them.
func Wrap(m interface{ Run() int }) interface{ Run() int } { return wrapped{m} }

type wrapped struct{ m interface{ Run() int } }

func (w wrapped) Run() int {
	srv, err := Start()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		fmt.Fprintln(os.Stderr, "pgtest: tests skipped:", err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	current = srv
	defer func() { current = nil }()
	code := w.m.Run()
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Current returns the server Main started.
func Current() *Server { return current }

// Start starts a server, or returns one for BGTASK_PG_DSN.
func Start() (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return &Server{DSN: dsn}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bgtask-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, log: new(syncBuffer)}
	cred, err := serverUser(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Durability is traded for speed (a throw-away server). The planner
	// and JIT settings stay PostgreSQL's defaults on purpose: the store
	// must not depend on them, and the plan test checks them.
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "log_min_messages=warning")
	// Pdeathsig: a test binary that dies (panic, timeout) takes the server with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Dir = dir
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }() // Stop waits on done
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady tries to connect on every tick until the server answers, it
// exits, or the deadline passes.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %v\n%s", s.cmd.ProcessState, s.log.String())
		case <-deadline.C:
			return fmt.Errorf("postgres not ready after %v: %v\n%s", limit, last, s.log.String())
		case <-tick.C:
		}
	}
}

// Stop stops a server Start started (SIGINT: fast shutdown) and removes its
// directory. A server named by BGTASK_PG_DSN is left running, without the
// databases CreateSchema created in it.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return s.dropDBs()
	}
	defer os.RemoveAll(s.dir)
	s.cmd.Process.Signal(syscall.SIGINT)
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
		return nil
	case <-t.C:
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		return errors.New("postgres did not stop within 30s; killed")
	}
}

// NewDSN returns the DSN of a fresh, empty schema, dropped when the test
// ends. The schema is in a database no other running test of this process
// uses (CreateSchema), so tests that call NewDSN may run in parallel.
func NewDSN(tb testing.TB) string {
	tb.Helper()
	dsn, drop, err := current.CreateSchema(context.Background())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// CreateSchema creates an empty schema and returns a DSN whose search_path
// is that schema, and a function that drops it. It is safe for concurrent
// use.
//
// Each schema lives in a database of its own until drop is called: tests
// read the database's pg_stat_activity (and terminate the listeners they
// find there), its pg_tables and pg_indexes, and take advisory locks by
// hand, all of which belong to a database, not to a schema. A database is
// created on demand and reused (a fresh schema in it) once the schema it
// held is dropped and no connection to it is left: a database per
// concurrent schema, not per test.
func (s *Server) CreateSchema(ctx context.Context) (dsn string, drop func() error, err error) {
	u, err := url.Parse(s.DSN)
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", EnvDSN, err)
	}
	db, err := s.acquireDB(ctx)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + db
	base := u.String()
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, dbSeq.Add(1))
	if err := s.exec(ctx, base, "CREATE SCHEMA "+name); err != nil {
		s.releaseDB(db, base)
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop = func() error {
		if err := s.exec(context.Background(), base, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		s.releaseDB(db, base)
		return nil
	}
	return u.String(), drop, nil
}

// NewDatabaseDSN is NewDSN in a database of its own, made by CREATE
// DATABASE with options (such as "TEMPLATE template0 LOCALE_PROVIDER icu
// ICU_LOCALE 'en-US' LOCALE 'C'") and dropped when the test ends: for a
// test that needs a database unlike the server's default one.
func NewDatabaseDSN(tb testing.TB, options string) string {
	tb.Helper()
	dsn, drop, err := current.CreateDatabase(context.Background(), options)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// CreateDatabase creates a database with options (CREATE DATABASE's, after
// the name) and an empty schema in it, and returns a DSN whose search_path
// is that schema, and a function that drops the database (connections
// left to it are ended). It is safe for concurrent use. The database is
// never reused.
func (s *Server) CreateDatabase(ctx context.Context, options string) (dsn string, drop func() error, err error) {
	u, err := url.Parse(s.DSN)
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", EnvDSN, err)
	}
	db := fmt.Sprintf("%s_%d_own_%d", testDB, os.Getpid(), dbSeq.Add(1))
	if err := s.exec(ctx, s.DSN, "CREATE DATABASE "+db+" "+options); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", db, err)
	}
	drop = func() error {
		if err := s.exec(context.Background(), s.DSN, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", db, err)
		}
		return nil
	}
	u.Path = "/" + db
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, dbSeq.Add(1))
	if err := s.exec(ctx, u.String(), "CREATE SCHEMA "+name); err != nil {
		return "", nil, errors.Join(fmt.Errorf("create schema %s: %w", name, err), drop())
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// testDB prefixes the names of the databases CreateSchema creates.
const testDB = "bgtask_test"

// acquireDB returns a database no schema of this process is using: a free
// one, or a new one.
func (s *Server) acquireDB(ctx context.Context) (string, error) {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		db := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return db, nil
	}
	s.created++
	// The process id keeps the databases of test binaries sharing one
	// server (BGTASK_PG_DSN, packages run in parallel) apart.
	db := fmt.Sprintf("%s_%d_%d", testDB, os.Getpid(), s.created)
	s.mu.Unlock()
	err := s.exec(ctx, s.DSN, "CREATE DATABASE "+db)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: an earlier run's with this pid
		err = nil
	}
	if err != nil {
		return "", fmt.Errorf("create database %s: %w", db, err)
	}
	s.mu.Lock()
	s.all = append(s.all, db)
	s.mu.Unlock()
	return db, nil
}

// releaseDB makes db free for another schema, unless a connection to it is
// left (a killed process's, not yet gone): that one could still hold an
// advisory lock or LISTEN, so db is not reused.
func (s *Server) releaseDB(db, base string) {
	var others int
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil || others > 0 {
		return
	}
	s.mu.Lock()
	s.free = append(s.free, db)
	s.mu.Unlock()
}

// dropDBs drops the databases CreateSchema created, for a server this
// process did not start (a started one goes with its directory).
func (s *Server) dropDBs() error {
	s.mu.Lock()
	all := s.all
	s.all, s.free = nil, nil
	s.mu.Unlock()
	var errs []error
	for _, db := range all {
		if err := s.exec(context.Background(), s.DSN, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("drop database %s: %w", db, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Server) exec(ctx context.Context, dsn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// ErrNoServer is returned by Start when there are no PostgreSQL server
// binaries here and EnvDSN is not set.
var ErrNoServer = errors.New("no PostgreSQL server binaries (initdb, postgres) in PATH or /usr/lib/postgresql/*/bin, and " + EnvDSN + " is not set; ./test.sh installs the postgresql package")

// findBin returns the directory holding initdb and postgres: from PATH, then
// the newest /usr/lib/postgresql/*/bin. It installs nothing: ./test.sh does.
func findBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	if dir := libBin(); dir != "" {
		return dir, nil
	}
	return "", ErrNoServer
}

func libBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// serverUser returns the credential to run the server with (nil: the
// current user) and gives dir to that user.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects the server's log for error messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		b.buf.Reset()
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartDSN is for a test in a package without Wrap: it starts a server of
// its own for tb (or uses BGTASK_PG_DSN), stopped when tb ends, and returns
// the DSN of a fresh schema in it. With no server binaries outside CI it
// skips tb in one line; under CI that fails tb instead.
func StartDSN(tb testing.TB) string {
	tb.Helper()
	srv, err := Start()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		tb.Skip("pgtest:", err) // ./test.sh installs the server
	}
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	dsn, drop, err := srv.CreateSchema(context.Background())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { _ = drop() })
	return dsn
}
