package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// ErrStarted is returned by a second Start: a Store serves one Manager.
var ErrStarted = errors.New("sqlitestore: store already started")

// poller is the goroutine of Start; halt stops it and waits for it.
type poller struct {
	started bool               // guarded by Store.mu
	stop    context.CancelFunc // set once by Start, under Store.mu
	wg      sync.WaitGroup
}

func (p *poller) halt() {
	if p.stop != nil {
		p.stop()
		p.wg.Wait()
	}
}

// Start makes the Store carry out the cancel requests that another process
// (an operator's inspector, through ReadOnly.RequestCancel) writes to the
// file: a goroutine reads them every poll interval (WithPollInterval) and
// cancels each task that m runs, as m.Cancel or m.CancelTree with the
// request's reason, then deletes the request. A request is consumed only
// by the process that runs its task: with several processes on one file,
// each carries out its own tasks' requests and leaves the others'. A
// request of a resumable task that waits in the queue (no process runs
// it) is carried out by the first Store that reads it: its Manager ends
// the task cancelled, as m.Cancel does. A request whose task no process
// runs any more (it ended, or the process that ran it is gone) expires and
// is deleted. m must use this Store
// (WithStore).
//
// Close stops the goroutine and waits for it. Without Start a Store ignores
// cancel requests. Start returns ErrStarted if called twice and ErrClosed
// after Close. ctx is not kept.
func (s *Store) Start(ctx context.Context, rt store.Runtime) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.poll.started:
		return ErrStarted
	}
	s.poll.started = true
	bg, stop := context.WithCancel(context.Background())
	s.poll.stop = stop
	s.poll.wg.Go(func() { s.pollLoop(bg, rt) })
	return nil
}

func (s *Store) pollLoop(ctx context.Context, rt store.Runtime) {
	t := time.NewTicker(s.cfg.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.handleCancels(ctx, rt); err != nil && ctx.Err() == nil {
			s.cfg.logger.Warn("sqlitestore: reading cancel requests failed", "err", err)
		}
	}
}

// cancelRequest is a row of cancel_requests, with the status and the
// instance of its task's record ("" for both when the record is gone), and
// whether the record waits in the queue (store.Waiting).
type cancelRequest struct {
	seq      int64
	at       int64 // requested_at: with seq and task, names the row (seq alone is reused)
	task     string
	tree     bool
	reason   string
	status   string
	instance string
	waiting  bool
}

// cancelPage bounds the requests one read of handleCancels takes.
const cancelPage = 256

// handleCancels carries out the pending requests for the tasks that this
// Store's instances run, oldest first, and deletes them. A request is
// consumed only by the process that runs its task: one for a task of
// another instance that is alive is left for that instance's process; one
// for a task waiting in the queue is carried out here (no process runs
// it); one whose task no process runs any more (its record is terminal or
// gone, or its instance is gone) expires, and is deleted. It reads before it
// writes, so an idle poll takes no lock.
func (s *Store) handleCancels(ctx context.Context, rt store.Runtime) error {
	alive := make(map[string]bool) // other instances' liveness, for this poll
	for after := int64(0); ; {
		reqs, err := s.readCancels(ctx, after)
		if err != nil || len(reqs) == 0 {
			return err
		}
		var done []cancelRequest
		for _, r := range reqs {
			after = r.seq
			switch {
			case r.status == "" || bgtype.Status(r.status).IsTerminal():
				s.cfg.logger.Debug("sqlitestore: cancel request expired", "task", r.task, "status", r.status)
			case r.waiting:
				// The Manager ends it in the file, as a claim of the waiting
				// attempt: of two processes, or a cancel and a claim, the
				// first wins. Nothing signalled: it was claimed or ended
				// meanwhile, and the next poll reads where it went.
				n, ok := s.carryOut(ctx, rt, r)
				if !ok {
					continue
				}
				if n == 0 {
					s.cfg.logger.Debug("sqlitestore: cancel request left: its waiting task was claimed or ended meanwhile", "task", r.task)
					continue
				}
				s.cfg.logger.Debug("sqlitestore: cancel request handled", "task", r.task, "tree", r.tree, "signalled", n)
			case s.liveInstance(r.instance):
				n, ok := s.carryOut(ctx, rt, r)
				if !ok {
					continue // left for the next poll: a failed cancel is not a lost request
				}
				s.cfg.logger.Debug("sqlitestore: cancel request handled", "task", r.task, "tree", r.tree, "signalled", n)
			default:
				live, ok := alive[r.instance]
				if !ok {
					if live, err = s.InstanceAlive(ctx, r.instance); err != nil {
						s.cfg.logger.Warn("sqlitestore: cancel request left: is its instance alive?", "task", r.task, "instance", r.instance, "err", err)
						live = true // not known gone: leave it
					}
					alive[r.instance] = live
				}
				if live {
					continue // its own process carries it out
				}
				s.cfg.logger.Debug("sqlitestore: cancel request expired", "task", r.task, "instance", r.instance)
			}
			done = append(done, r)
		}
		if err := s.deleteCancels(ctx, done); err != nil {
			return err
		}
		if len(reqs) < cancelPage {
			return nil
		}
	}
}

// readCancels reads a page of pending requests after seq, with their
// tasks' status and instance.
func (s *Store) readCancels(ctx context.Context, after int64) ([]cancelRequest, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.seq, c.requested_at, c.task_id, c.tree, c.reason, coalesce(t.status, ''), coalesce(t.instance, ''),
			coalesce(t.resume IS NOT NULL AND t.status = 'queued' AND t.instance = '', 0)
		FROM cancel_requests c LEFT JOIN tasks t ON t.id = c.task_id
		WHERE c.seq > ? ORDER BY c.seq LIMIT ?`, after, cancelPage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var reqs []cancelRequest
	for rows.Next() {
		var r cancelRequest
		if err := rows.Scan(&r.seq, &r.at, &r.task, &r.tree, &r.reason, &r.status, &r.instance, &r.waiting); err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	return reqs, rows.Err()
}

// carryOut cancels r's task in m, as m.Cancel or m.CancelTree with the
// request's reason, and returns how many tasks it signalled and whether
// the request is done with. One that failed (a commit of the Store that
// failed, say) is tried again at the next poll; it expires once its task
// has ended.
func (s *Store) carryOut(ctx context.Context, rt store.Runtime, r cancelRequest) (int, bool) {
	n, err := rt.CancelRequested(ctx, r.task, r.tree, r.reason)
	if err != nil {
		s.cfg.logger.Warn("sqlitestore: cancel request failed; tried again at the next poll", "task", r.task, "err", err)
		return 0, false
	}
	return n, true
}

// deleteCancels deletes the requests reqs, in one statement. A row is
// matched by its seq, task and requested_at, not by seq alone: seq is a
// rowid, which SQLite hands out again once the newest row is deleted, so
// between this Store's read and this delete another process may delete a
// request and an inspector write a new one under the same seq (a request
// that nobody would then carry out).
func (s *Store) deleteCancels(ctx context.Context, reqs []cancelRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	// seq IN (…) lets SQLite find the rows by rowid; the row values alone
	// would scan the table.
	args := make([]any, 0, 4*len(reqs))
	for _, r := range reqs {
		args = append(args, r.seq)
	}
	for _, r := range reqs {
		args = append(args, r.seq, r.task, r.at)
	}
	more := len(reqs) - 1
	_, err := s.db.ExecContext(ctx, "DELETE FROM cancel_requests WHERE seq IN (?"+strings.Repeat(", ?", more)+
		") AND (seq, task_id, requested_at) IN (VALUES (?, ?, ?)"+strings.Repeat(", (?, ?, ?)", more)+")", args...)
	return err
}

// RequestCancel records a request that the process running task id (the
// application that opened the file with Open and called Start) cancel it,
// with its attached descendants when tree is true, giving reason (may be
// empty). A resumable task that waits in the queue is cancelled by the
// first started Store that reads the request. It is the one write of a ReadOnly, made on a connection of its
// own in one transaction. It returns the task's record as read in that
// transaction: if its status is already terminal, nothing was recorded.
// An unknown id is an error matching bgtype.ErrNotFound. It returns once
// the request is recorded, not when the task stops.
func (r *ReadOnly) RequestCancel(ctx context.Context, id string, tree bool, reason string) (bgtype.TaskMeta, error) {
	if r.closed.Load() {
		return bgtype.TaskMeta{}, ErrClosed
	}
	dsn := fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_txlock=immediate", fileURI(r.path), r.cfg.busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: request cancel of %s: %w", id, err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil) // immediate: the status read and the insert are one step
	if err != nil {
		return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: request cancel of %s: %w", id, err)
	}
	defer tx.Rollback()
	var rw row
	if err := rw.scan(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM tasks WHERE id = ?", id)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
		}
		return bgtype.TaskMeta{}, err
	}
	m, err := rw.decode()
	if err != nil || m.Status.IsTerminal() {
		return m, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO cancel_requests (task_id, tree, reason, requested_at) VALUES (?, ?, ?, ?)",
		id, tree, reason, time.Now().UnixMicro()); err != nil {
		return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: request cancel of %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return bgtype.TaskMeta{}, fmt.Errorf("sqlitestore: request cancel of %s: %w", id, err)
	}
	return m, nil
}

// WithPollInterval sets how often a started Store (Start) reads the cancel
// requests that other processes wrote. Default DefaultPollInterval. d must
// be positive.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) { c.poll = d }
}
