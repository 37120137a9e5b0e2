package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
)

// Tests of the listener's reconnect, which takes the instance's lock again
// with a try (relock): Start's own, waiting take of the lock is what
// TestStartRefusesALiveInstanceID proves.

// heldReconnect is a WithBeforeReconnect hook that holds the listener's
// first reconnect: entered is closed when it starts, and it goes on once
// release is called (the test's end calls it, so that Close never waits
// for a held listener). Each later reconnect sends on again, if it is
// empty.
type heldReconnect struct {
	entered, released chan struct{}
	again             chan struct{}
	calls             atomic.Int64
	free              sync.Once
}

func newHeldReconnect() *heldReconnect {
	return &heldReconnect{entered: make(chan struct{}), released: make(chan struct{}), again: make(chan struct{}, 1)}
}

func (h *heldReconnect) hook() {
	if h.calls.Add(1) > 1 {
		select {
		case h.again <- struct{}{}:
		default:
		}
		return
	}
	close(h.entered)
	<-h.released
}

func (h *heldReconnect) release() { h.free.Do(func() { close(h.released) }) }

// dropListener ends the session of instance id's listening connection, as
// when the connection drops, waits for the server to have ended it (with
// the instance's lock) and for the listener to be held before its
// reconnect.
func dropListener(t *testing.T, dsn, id string, held *heldReconnect) {
	t.Helper()
	app := pgstore.ListenerAppName + id
	if n := sqlExec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, app); n != 1 {
		t.Fatalf("terminated %d listeners, want 1", n)
	}
	waitFor(t, "the listener's session gone", func() bool {
		return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, app) == 0
	})
	select {
	case <-held.entered:
	case <-time.After(hangGuard):
		t.Fatalf("the listener did not reconnect within %v", hangGuard)
	}
}

// listenerLock returns the statement that takes the advisory lock that
// instance id's listening connection holds, read from pg_locks, so that
// the test does not depend on how the lock's key is made.
func listenerLock(t *testing.T, dsn, id string) string {
	t.Helper()
	var classid, objid uint32
	var objsubid int16
	sqlScan(t, dsn, `SELECT l.classid, l.objid, l.objsubid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() AND a.application_name = '`+pgstore.ListenerAppName+id+`'`,
		&classid, &objid, &objsubid)
	if objsubid == 2 { // a key of two int4
		return fmt.Sprintf("SELECT pg_advisory_lock(%d, %d)", int32(classid), int32(objid))
	}
	return fmt.Sprintf("SELECT pg_advisory_lock(%d)", int64(classid)<<32|int64(objid))
}

// A listener that reconnects while nobody holds the instance's lock takes
// it again: a second process's Start with the id is then refused, and the
// first goes on. (A relock that only believed it took the lock let that
// Start register the id beside the live instance.)
func TestReconnectTakesTheInstanceLockAgain(t *testing.T) {
	t.Parallel()
	held := newHeldReconnect()
	// The poll ticks once an hour: only the listener wakes the poller, so a
	// cancel request carried out tells that the listener is back.
	s1, dsn := openStore(t, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour),
		pgstore.WithPollInterval(time.Hour), pgstore.WithReconnectBackoff(time.Millisecond, time.Millisecond),
		pgstore.WithBeforeReconnect(held.hook))
	m1 := startManager(t, s1, "inst_dup")
	t.Cleanup(held.release) // runs before Shutdown and Close
	causes := make(chan error, 1)
	id, err := m1.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}

	dropListener(t, dsn, "inst_dup", held)
	held.release()
	if err := s1.RequestCancel(t.Context(), id, false, "after the reconnect"); err != nil {
		t.Fatal(err)
	}
	if got, want := waitCause(t, causes), fmt.Sprintf("%v: after the reconnect", bgtask.ErrCanceled); got == nil || got.Error() != want {
		t.Fatalf("the task ended with cause %v, want %q", got, want)
	}

	s2, err := pgstore.Open(t.Context(), dsn, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	m2, err := bgtask.New(bgtask.WithStore(s2), bgtask.WithInstance("inst_dup"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Shutdown(context.Background()) })
	err = s2.Start(t.Context(), m2.Runtime())
	if !errors.Is(err, pgstore.ErrInstanceRunning) ||
		err.Error() != `pgstore: instance already running: pgstore: instance "inst_dup" is already running (registered by another live process): give each process its own instance id` {
		t.Fatalf("Start beside the reconnected instance = %v, want ErrInstanceRunning", err)
	}
	if s1.Lost() {
		t.Fatal("the reconnected instance is lost")
	}
}

// A listener that reconnects after another process took the instance's
// lock and registered the id (a token of its own on the row) finds its
// instance lost there, before any heartbeat: its tasks are cancelled with
// ErrInstanceLost, and it carries out no cancel request. (A relock that
// believed it took the lock listened on, and carried out the request.)
func TestReconnectFindsTheInstanceTaken(t *testing.T) {
	t.Parallel()
	held := newHeldReconnect()
	// The heartbeat and the poll tick once an hour: only the reconnect can
	// find the instance lost, only the listener can wake the poller.
	s1, dsn := openStore(t, pgstore.WithHeartbeatInterval(time.Hour), pgstore.WithGrace(3*time.Hour),
		pgstore.WithPollInterval(time.Hour), pgstore.WithReconnectBackoff(time.Millisecond, time.Millisecond),
		pgstore.WithBeforeReconnect(held.hook))
	m1 := startManager(t, s1, "inst_dup")
	t.Cleanup(held.release) // runs before Shutdown and Close
	causes := make(chan error, 1)
	id, err := m1.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	lock := listenerLock(t, dsn, "inst_dup")

	dropListener(t, dsn, "inst_dup", held)
	// Another process registers the id, as its Start does: the lock, then
	// a token of its own on the row.
	other := sqlConn(t, dsn)
	if _, err := other.Exec(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_instances SET token = 'another process' WHERE id = 'inst_dup'`); n != 1 {
		t.Fatalf("updated %d instance rows, want 1", n)
	}
	if err := s1.RequestCancel(t.Context(), id, false, "heard by the listener"); err != nil {
		t.Fatal(err)
	}
	held.release()
	if got := waitCause(t, causes); got != bgtype.ErrInstanceLost {
		t.Fatalf("the task ended with cause %v, want %v", got, bgtype.ErrInstanceLost)
	}
	if !s1.Lost() {
		t.Fatal("Lost() = false")
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_cancel_requests WHERE handled_at IS NULL`); n != 1 {
		t.Fatalf("%d cancel requests left unhandled, want 1: the lost instance carried it out", n)
	}
}

// A listener that reconnects while another session holds the instance's
// lock and the row keeps this process's token (as when the server has not
// yet ended the listener's previous session) does not listen without the
// lock: it tries again at each reconnect, and takes the lock once that
// session ends. A second process's Start with the id is then refused.
// Before, the listener listened on without the lock, and once the other
// session ended that Start registered the id beside the live instance.
func TestReconnectWaitsForTheInstanceLock(t *testing.T) {
	t.Parallel()
	held := newHeldReconnect()
	// The poll ticks once an hour: only the listener wakes the poller, so a
	// cancel request carried out tells that the listener is back.
	s1, dsn := openStore(t, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour),
		pgstore.WithPollInterval(time.Hour), pgstore.WithReconnectBackoff(time.Millisecond, 20*time.Millisecond),
		pgstore.WithBeforeReconnect(held.hook))
	m1 := startManager(t, s1, "inst_dup")
	t.Cleanup(held.release) // runs before Shutdown and Close
	causes := make(chan error, 1)
	id, err := m1.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	lock := listenerLock(t, dsn, "inst_dup")

	dropListener(t, dsn, "inst_dup", held)
	other := sqlConn(t, dsn) // holds the lock, the row keeps s1's token
	if _, err := other.Exec(t.Context(), lock); err != nil {
		t.Fatal(err)
	}
	if err := s1.RequestCancel(t.Context(), id, false, "after the lock"); err != nil {
		t.Fatal(err)
	}
	held.release()
	var cause error
	select {
	case <-held.again: // the lock was held: the listener reconnects again
	case cause = <-causes: // it listened without the lock (checked below)
	case <-time.After(hangGuard):
		t.Fatalf("the listener neither reconnected again nor carried out the request within %v", hangGuard)
	}
	if err := other.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause == nil {
		cause = waitCause(t, causes)
	}
	if want := fmt.Sprintf("%v: after the lock", bgtask.ErrCanceled); cause == nil || cause.Error() != want {
		t.Fatalf("the task ended with cause %v, want %q", cause, want)
	}

	s2, err := pgstore.Open(t.Context(), dsn, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	m2, err := bgtask.New(bgtask.WithStore(s2), bgtask.WithInstance("inst_dup"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Shutdown(context.Background()) })
	if err := s2.Start(t.Context(), m2.Runtime()); !errors.Is(err, pgstore.ErrInstanceRunning) {
		t.Fatalf("Start beside the reconnected instance = %v, want ErrInstanceRunning", err)
	}
	if s1.Lost() {
		t.Fatal("the reconnected instance is lost")
	}
}
