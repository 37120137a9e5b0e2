// Package pgtest is a test helper, not part of the store: it runs a
// throw-away PostgreSQL server for tests, this module's and those of the
// modules built on pgstore: initdb in a temporary directory, a postgres
// process on a free 127.0.0.1 port, and a fresh database per test. When
// BGTASK_PG_DSN is set, that server is used instead and nothing is started.
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

	dbOnce sync.Once
	dbErr  error
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
// directory. A server named by BGTASK_PG_DSN is left alone.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
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
// ends. Each schema is its own namespace (the DSN sets search_path), in one
// shared test database: much cheaper than a database per test.
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

// testDB is the database every schema of this process lives in.
const testDB = "bgtask_test"

// CreateSchema creates an empty schema and returns a DSN whose search_path
// is that schema, and a function that drops it. The first call creates
// the test database.
func (s *Server) CreateSchema(ctx context.Context) (dsn string, drop func() error, err error) {
	u, err := url.Parse(s.DSN)
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", EnvDSN, err)
	}
	s.dbOnce.Do(func() {
		err := s.exec(ctx, s.DSN, "CREATE DATABASE "+testDB)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: an earlier run's, or another package's
			err = nil
		}
		s.dbErr = err
	})
	if s.dbErr != nil {
		return "", nil, fmt.Errorf("create database %s: %w", testDB, s.dbErr)
	}
	u.Path = "/" + testDB
	base := u.String()
	name := fmt.Sprintf("t_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, dbSeq.Add(1))
	if err := s.exec(ctx, base, "CREATE SCHEMA "+name); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop = func() error {
		if err := s.exec(context.Background(), base, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
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
