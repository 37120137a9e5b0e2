package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store"
)

// cancelChannel is the NOTIFY channel of cancel requests, followed by the
// scope's suffix (scope.go); the payload is the id of the instance that
// runs the task.
const cancelChannel = "bgtask_cancel"

// ListenerAppName prefixes the application_name of the listening
// connection, followed by the instance id, so an operator (or a test) can
// find it in pg_stat_activity.
const ListenerAppName = "bgtask-listener "

// RequestCancel implements store.SharedStore: it records a cancel request
// addressed to the instance recorded as running task id, and notifies that
// instance (NOTIFY, delivered when the request is committed). A request of
// a resumable task that waits in the queue is addressed to no instance
// (""): the first started instance whose poller reads it carries it out. A task that
// has already ended needs nothing: RequestCancel returns nil. An unknown id
// is an error matching bgtask.ErrNotFound. The request carries reason: the
// instance that runs the task records it as the cancel reason.
func (s *Store) RequestCancel(ctx context.Context, id string, tree bool, reason string) error {
	if s.isClosed() {
		return ErrClosed
	}
	rs, err := s.pool.Query(ctx, requestCancelSQL, id, tree, liveStatuses, s.scope.cancel, reason)
	if err != nil {
		return fmt.Errorf("pgstore: request cancel of %s: %w", id, err)
	}
	n := 0
	for rs.Next() {
		n++
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("pgstore: request cancel of %s: %w", id, err)
	}
	if n == 0 {
		if _, err := s.Get(ctx, id); err != nil {
			return err // not found, or the database's error
		}
	}
	return nil
}

// requestCancelSQL records a cancel request ($1 the task, $2 tree, $5 the
// reason) addressed to the instance that runs the task, if it is live ($3),
// and notifies that instance ($4) when the transaction commits; a waiting
// task's is addressed to "", which every listener hears.
const requestCancelSQL = `WITH r AS (
		INSERT INTO bgtask_cancel_requests (task_id, instance, tree, reason)
		SELECT id, instance, $2, $5 FROM bgtask_tasks WHERE id = $1 AND status = ANY($3)
		RETURNING instance)
	SELECT pg_notify($4, instance) FROM r`

// listenLoop keeps a dedicated connection LISTENing for cancel requests
// addressed to instance id and wakes the poller for each. When the
// connection drops it reconnects with backoff; the poller covers the gap.
func (s *Store) listenLoop(ctx context.Context, id string, conn *pgx.Conn, wake pollWake) {
	backoff := s.cfg.backoffMin
	var prev listenSession // the last session that listened with the lock
	for {
		err := s.listen(ctx, id, conn, wake, &prev, func() { backoff = s.cfg.backoffMin })
		conn = nil
		if ctx.Err() != nil || errors.Is(err, ErrInstanceLost) {
			return
		}
		if errors.Is(err, errInstanceLockHeld) {
			// Not a lost connection: the lock's holder is ending (relock).
			s.log.Info("pgstore: cancel listener waits for the instance lock; reconnecting", "instance", id, "backoff", backoff)
		} else {
			s.log.Warn("pgstore: cancel listener lost its connection; reconnecting", "instance", id, "err", err, "backoff", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.cfg.backoffMax)
		if s.cfg.relisten != nil {
			s.cfg.relisten()
		}
	}
}

// connectListener opens a listening connection for instance id.
func (s *Store) connectListener(ctx context.Context, id string) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerAppName + id
	return pgx.ConnectConfig(ctx, cfg)
}

// listen listens on conn (Start's, holding the instance's lock), or on a
// new connection that takes the lock again. When another session holds
// the lock and the instance's row has another process's token, another
// process registered the id since this connection dropped: the instance
// is lost. prev is the session that last listened with the lock; listen
// sets it to conn's.
func (s *Store) listen(ctx context.Context, id string, conn *pgx.Conn, wake pollWake, prev *listenSession, connected func()) error {
	if conn == nil {
		var err error
		if conn, err = s.connectListener(ctx, id); err != nil {
			return err
		}
		if err := s.relock(ctx, conn, id, prev); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return err
		}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ses, err := sessionOf(ctx, conn)
	if err != nil {
		return err
	}
	*prev = ses
	if !s.cfg.deaf { // deaf: the poll alone carries requests (benchmarks)
		if _, err := conn.Exec(ctx, listenSQL(s.scope)); err != nil {
			return err
		}
	}
	// What settled while no one listened (catchup.go): read after LISTEN,
	// so what commits later is heard.
	if err := s.catchUp(ctx, conn); err != nil {
		return err
	}
	if !s.cfg.deaf {
		s.cursor.listening.Store(true)
		defer s.cursor.listening.Store(false)
	}
	connected()
	signal(wake.all) // requests sent while no one listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case s.scope.cancel:
			if n.Payload == id || n.Payload == "" { // "": a waiting task's, for any instance
				signal(wake.all)
			}
		case s.scope.message:
			if n.Payload == id {
				signal(wake.msgs)
			}
		case s.scope.messageDone:
			s.msgWaits.notify(n.Payload)
		case s.scope.settled:
			if strings.HasPrefix(n.Payload, markerPrefix) {
				s.marked(n.Payload)
				continue
			}
			s.notifySettled(n.Payload)
		}
	}
}

// relock takes the instance's lock again on a new listening connection.
// If another session holds it, the row's token tells whether another
// process registered the id (the instance is lost) or not: then the
// holder is this process's previous listening session prev, which the
// server has not ended yet (it has not noticed the connection close), or
// another process's Start that has not written its token yet. relock then
// ends prev, if it is still there, and returns errInstanceLockHeld: the
// listener never listens without the lock (a Start with the id would
// succeed once the holder ends), and takes it at a later reconnect, or
// finds the instance lost; the poll covers the gap. prev is cleared once
// ended.
func (s *Store) relock(ctx context.Context, conn *pgx.Conn, id string, prev *listenSession) error {
	var got bool
	if err := conn.QueryRow(ctx, tryInstanceLockSQL, id, s.scope.lock).Scan(&got); err != nil || got {
		return err
	}
	var token string
	if err := conn.QueryRow(ctx, `SELECT token FROM bgtask_instances WHERE id = $1`, id).Scan(&token); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if token != s.token {
		s.markLost(id, "another process registered its id")
		return ErrInstanceLost
	}
	ended, err := prev.end(ctx, conn)
	if err != nil {
		return err
	}
	if ended {
		s.log.Warn("pgstore: ended this process's previous listening session, which still held the instance lock", "instance", id, "pid", prev.pid)
		*prev = listenSession{} // ended once: the server lets it go in its own time
	}
	return errInstanceLockHeld
}

// pollWake wakes the poller: for everything it handles (all: a cancel
// request, or the listener's connect), or for the messages alone (msgs),
// so that a message is not handed over behind two reads of cancel
// requests.
type pollWake struct{ all, msgs chan struct{} }

func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pollLoop handles the cancel requests and the messages addressed to
// instance id every poll interval, and at once when the listener hears of
// one (of a message: the messages alone), until the instance is lost;
// every poll interval it also catches up on what settled (pollSettled).
func (s *Store) pollLoop(ctx context.Context, rt store.Runtime, id string, wake pollWake) {
	t := time.NewTicker(s.cfg.poll)
	defer t.Stop()
	for {
		tick, msgs := false, false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick = true
		case <-wake.all:
		case <-wake.msgs:
			msgs = true
		}
		if s.checkFence() != nil {
			return // a lost instance's tasks are cancelled already; it writes nothing
		}
		if !msgs {
			if err := s.handleCancels(ctx, rt, id); err != nil && ctx.Err() == nil {
				s.log.Warn("pgstore: reading cancel requests failed", "instance", id, "err", err)
			}
			if err := s.handleRunCancels(ctx, rt, id); err != nil && ctx.Err() == nil {
				s.log.Warn("pgstore: reading run cancel requests failed", "instance", id, "err", err)
			}
		}
		if err := s.handleMessages(ctx, rt, id); err != nil && ctx.Err() == nil {
			s.log.Warn("pgstore: handing over messages failed", "instance", id, "err", err)
		}
		// What settled is caught up on at the listener's connect and every
		// poll interval, never per request.
		if tick {
			if err := s.pollSettled(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("pgstore: catching up on settled records failed", "instance", id, "err", err)
			}
		}
		if s.cfg.afterPoll != nil {
			s.cfg.afterPoll(id)
		}
	}
}

// handleCancels claims the instance's pending cancel requests, and those
// addressed to no instance (of a resumable task that waited in the queue
// when asked: the first instance to claim one carries it out), marks them
// handled, and cancels the tasks in m. The Manager's cancel ends a task
// that still waits as a claim of its attempt; one claimed meanwhile gets a
// request addressed to its instance (RequestCancel).
func (s *Store) handleCancels(ctx context.Context, rt store.Runtime, id string) error {
	rs, err := s.bg.Query(ctx, `UPDATE bgtask_cancel_requests SET handled_at = now() WHERE id IN (
			SELECT id FROM bgtask_cancel_requests WHERE instance IN ($1, '') AND handled_at IS NULL
			ORDER BY id FOR UPDATE SKIP LOCKED)
		RETURNING id, task_id, tree, reason`, id)
	if err != nil {
		return err
	}
	type req struct {
		seq    int64
		task   string
		tree   bool
		reason string
	}
	reqs, err := pgx.CollectRows(rs, func(row pgx.CollectableRow) (r req, err error) {
		return r, row.Scan(&r.seq, &r.task, &r.tree, &r.reason)
	})
	if err != nil {
		return err
	}
	slices.SortFunc(reqs, func(a, b req) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range reqs {
		n, err := rt.CancelRequested(ctx, r.task, r.tree, r.reason)
		if err != nil {
			s.log.Warn("pgstore: cancel request failed", "task", r.task, "err", err)
			continue
		}
		s.log.Debug("pgstore: cancel request handled", "task", r.task, "tree", r.tree, "signalled", n)
	}
	return nil
}
