package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A listener whose connection drops without the server noticing (a proxy
// closes the client side, the server keeps the session and its instance
// lock) finds the lock held by its own previous session at the reconnect:
// it ends that session (relock) and takes the lock at the next reconnect.
// It logs the dropped connection once as a warning, the ended session
// once, and the wait for the lock as information.
func TestReconnectEndsItsPreviousSession(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	proxy, viaProxy := newCutProxy(t, dsn) // closed after the Store
	logs := &logRecorder{}
	// The heartbeat and the poll tick once an hour: only the listener wakes
	// the poller, and no heartbeat logs a slow round trip.
	s1, err := pgstore.Open(t.Context(), viaProxy, pgstore.WithHeartbeatInterval(time.Hour),
		pgstore.WithGrace(3*time.Hour), pgstore.WithPollInterval(time.Hour),
		pgstore.WithReconnectBackoff(time.Millisecond, 20*time.Millisecond), pgstore.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s1.Close() })
	m1 := startManager(t, s1, "inst_cut")
	causes := make(chan error, 1)
	id, err := m1.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	app := pgstore.ListenerAppName + "inst_cut"
	var oldPID int32
	sqlScan(t, dsn, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = '`+app+`'`, &oldPID)
	lockHolder := `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() AND a.application_name = '` + app + `' AND a.pid <> $1`

	if n := proxy.cut(app); n != 1 {
		t.Fatalf("cut %d listening connections, want 1", n)
	}
	waitFor(t, "the previous listening session ended and a new one holding the instance lock", func() bool {
		var gone, held int
		sqlScanArgs(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, []any{oldPID}, &gone)
		sqlScanArgs(t, dsn, lockHolder, []any{oldPID}, &held)
		return gone == 0 && held == 1
	})
	if err := s1.RequestCancel(t.Context(), id, false, "after the cut"); err != nil {
		t.Fatal(err)
	}
	if got, want := waitCause(t, causes), fmt.Sprintf("%v: after the cut", bgtask.ErrCanceled); got == nil || got.Error() != want {
		t.Fatalf("the task ended with cause %v, want %q", got, want)
	}
	if s1.Lost() {
		t.Fatal("the reconnected instance is lost")
	}
	warns := logs.messages(slog.LevelWarn)
	want := []string{
		"pgstore: cancel listener lost its connection; reconnecting",
		"pgstore: ended this process's previous listening session, which still held the instance lock",
	}
	if strings.Join(warns, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(warns, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(logs.messages(slog.LevelInfo), "pgstore: cancel listener waits for the instance lock; reconnecting") {
		t.Fatalf("no information that the listener waited for the lock: %q", logs.messages(slog.LevelInfo))
	}
}

// logRecorder is a slog.Handler that keeps the messages of each level.
type logRecorder struct {
	mu   sync.Mutex
	msgs map[slog.Level][]string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msgs == nil {
		r.msgs = make(map[slog.Level][]string)
	}
	r.msgs[rec.Level] = append(r.msgs[rec.Level], rec.Message)
	return nil
}

// messages returns the messages logged at level, in order.
func (r *logRecorder) messages(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs[level]...)
}
