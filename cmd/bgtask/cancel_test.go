package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// running is a Manager on a store opened as the application opens it,
// started so that it carries out cancel requests, with a parent task and
// its attached child that both run until cancelled.
type running struct {
	m             *bgtask.Manager
	parent, child string
}

// startTasks makes the Manager on st (started with start) and its tasks,
// and returns once both run and their records say so.
func startTasks(t *testing.T, st store.Store, start func(*bgtask.Manager) error) running {
	t.Helper()
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance("inst-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) }) // before the store closes
	if err := start(m); err != nil {
		t.Fatal(err)
	}
	o := m.Owner("alice")
	started := make(chan struct{}, 2)
	block := func(ctx context.Context, _ *bgtask.Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	parent, err := o.Spawn(t.Context(), block, bgtask.WithName("outer"))
	if err != nil {
		t.Fatal(err)
	}
	child, err := o.Spawn(t.Context(), block, bgtask.WithName("inner"), bgtask.WithParent(bgtype.Parent{TaskID: parent}))
	if err != nil {
		t.Fatal(err)
	}
	<-started // a task's record says running before its function starts
	<-started
	return running{m: m, parent: parent, child: child}
}

// wait waits for the task to end and checks how.
func (r running) wait(t *testing.T, id string, reason string) {
	t.Helper()
	meta, _ := r.m.Wait(t.Context(), id)
	if meta.Status != bgtype.StatusCanceled || meta.CancelReason != reason {
		t.Fatalf("%s ended %s with reason %q; want cancelled with %q", id, meta.Status, meta.CancelReason, reason)
	}
}

// cancel through the inspector, on a read-only handle of its own, reaches
// the process that runs the task on each store; a second cancel finds it
// ended and writes nothing.
func TestCancelEndToEnd(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.db")
		st, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithPollInterval(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r := startTasks(t, st, func(m *bgtask.Manager) error { return st.Start(t.Context(), m.Runtime()) })
		got := inspect(t, nil, "cancel", r.child, "--reason", "stuck", "--db", path)
		if want := "cancel of task " + r.child + " requested (running on instance inst-test)\n"; got.code != 0 || got.stdout != want || got.stderr != "" {
			t.Fatalf("cancel: %+v, want stdout %q", got, want)
		}
		r.wait(t, r.child, "stuck")
		got = inspect(t, nil, "cancel", "--tree", r.parent, "--db", path)
		if want := "cancel of task tree " + r.parent + " requested (running on instance inst-test)\n"; got.code != 0 || got.stdout != want || got.stderr != "" {
			t.Fatalf("cancel --tree: %+v, want stdout %q", got, want)
		}
		r.wait(t, r.parent, "")
		before := sqliteSum(t, path)
		got = inspect(t, nil, "cancel", r.child, "--db", path)
		if got.code != 0 || got.stdout != "task "+r.child+" already cancelled: nothing to cancel\n" {
			t.Fatalf("cancel again: %+v", got)
		}
		if after := sqliteSum(t, path); after != before {
			t.Fatalf("cancelling an ended task changed the file:\n%s\n%s", before, after)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.NewDSN(t)
		st, err := pgstore.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r := startTasks(t, st, func(m *bgtask.Manager) error { return st.Start(t.Context(), m.Runtime()) })
		got := inspect(t, nil, "cancel", r.parent, "--tree", "--reason", "stuck", "--dsn", dsn)
		if want := "cancel of task tree " + r.parent + " requested (running on instance inst-test)\n"; got.code != 0 || got.stdout != want || got.stderr != "" {
			t.Fatalf("cancel --tree: %+v, want stdout %q", got, want)
		}
		r.wait(t, r.parent, "stuck")
		r.wait(t, r.child, "stuck")
		before := pgSum(t, dsn)
		got = inspect(t, nil, "cancel", r.child, "--dsn", dsn)
		if got.code != 0 || got.stdout != "task "+r.child+" already cancelled: nothing to cancel\n" {
			t.Fatalf("cancel again: %+v", got)
		}
		if after := pgSum(t, dsn); after != before {
			t.Fatalf("cancelling an ended task changed the database: %s, then %s", before, after)
		}
	})
}

// The cancel of a SQLite-backed task works from a second process: the
// test binary, run again as the inspector.
func TestCancelFromAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	st, err := sqlitestore.Open(t.Context(), path, sqlitestore.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := startTasks(t, st, func(m *bgtask.Manager) error { return st.Start(t.Context(), m.Runtime()) })
	cmd := exec.CommandContext(t.Context(), os.Args[0], "cancel", r.parent, "--tree", "--reason", "from afar", "--db", path)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector process: %v, stderr %q", err, stderr.String())
	}
	if want := "cancel of task tree " + r.parent + " requested (running on instance inst-test)\n"; stdout.String() != want || stderr.Len() != 0 {
		t.Fatalf("inspector process wrote %q, %q; want %q", stdout.String(), stderr.String(), want)
	}
	r.wait(t, r.parent, "from afar")
	r.wait(t, r.child, "from afar")
}

// A watch without --count ends when its context does (SIGINT), after the
// snapshot it was drawing, with exit status 0.
func TestWatchEndsOnInterrupt(t *testing.T) {
	b, _ := sqliteFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	e := testEnv(&stdout, &stderr, false, 0)
	e.stdout = writerFunc(func(p []byte) (int, error) {
		cancel() // the interrupt comes while the first snapshot is written
		return stdout.Write(p)
	})
	if code := e.run(ctx, append([]string{"watch", "--owner", "bob"}, b.flag...)); code != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if n := bytes.Count(stdout.Bytes(), []byte("bgtask watch ")); n != 1 {
		t.Fatalf("%d snapshots, want 1:\n%s", n, stdout.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
