package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// errInstanceLockHeld is why a reconnecting listener did not listen:
// another session holds the instance's lock while the instance's row
// keeps this process's token. The listener tries again at its next
// reconnect.
var errInstanceLockHeld = errors.New("pgstore: the instance lock is still held by another session; trying again")

// listenSession names the server session of a listening connection that
// held the instance's lock: a pid alone may be a later backend's.
type listenSession struct {
	pid   uint32
	start time.Time // pg_stat_activity.backend_start
}

// sessionOf reads the server session of conn.
func sessionOf(ctx context.Context, conn *pgx.Conn) (listenSession, error) {
	ses := listenSession{pid: conn.PgConn().PID()}
	err := conn.QueryRow(ctx, `SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&ses.start)
	return ses, err
}

// end asks the server, on conn, to end session ses if it is still there,
// and reports whether it was: this process's previous listening session,
// which the server has not noticed is gone, and which holds the lock.
func (ses listenSession) end(ctx context.Context, conn *pgx.Conn) (bool, error) {
	if ses.pid == 0 {
		return false, nil // never read: the server ends it in its own time
	}
	var ended bool
	err := conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`,
		int64(ses.pid), ses.start).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ended, err
}
