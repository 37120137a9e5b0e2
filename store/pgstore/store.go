package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrClosed is returned by calls on a Store after Close.
var ErrClosed = errors.New("pgstore: store closed")

// ErrInstanceLost is returned by Commit and TakeNotices once the instance
// this Store was started for lost its registration: its last successful
// heartbeat is older than nine tenths of the grace period, or another
// instance declared it dead and reaped its tasks.
// It matches bgtype.ErrInstanceLost. The Store stays lost; start a new
// instance (a new Manager and Store) to go on.
var ErrInstanceLost = fmt.Errorf("pgstore: %w", bgtype.ErrInstanceLost)

// Store is a store.SharedStore kept in PostgreSQL: a row per task, shared
// by every runtime instance (process) that opens the same database. Each
// Commit is one transaction in which store.Apply runs on the rows it
// locks, and every write is a compare-and-set on the row's version.
//
// Without Start, a Store is a plain durable Store. Start registers a
// Manager's runtime instance and runs its heartbeat, the reaper and the
// cancel listener until Close.
//
// Create it with Open; the zero value is not usable. A Store is safe for
// concurrent use. Methods return ctx's error when ctx ends first; the
// transaction in flight is then rolled back.
type Store struct {
	pool *pgxpool.Pool // commits and reads
	// bg serves the heartbeat, the reaper, the cancel poller and the age
	// limit's passes (age.go), one connection each at most, so none of
	// them waits behind commits, nor a commit behind them.
	bg  *pgxpool.Pool
	cfg config
	log *slog.Logger

	// clock is time.Now; readings are taken relative to base so that they
	// keep the monotonic clock. Tests replace it.
	clock func() time.Time
	base  time.Time
	// lastBeat is when the last successful heartbeat (or the registration)
	// was sent, in nanoseconds since base.
	lastBeat atomic.Int64
	// instance is the started instance's id; nil before Start.
	instance atomic.Pointer[string]
	token    string        // the started instance's registration token; set by Start before its goroutines
	lost     atomic.Bool   // the started instance lost its registration: refuse writes
	lostWake chan struct{} // tells the heartbeat loop that a write found the instance lost

	group     grouper      // the commits waiting for a transaction
	groups    atomic.Int64 // groups of several commits committed in one transaction
	grouped   atomic.Int64 // the commits they held
	late      atomic.Int64 // the commits of those that joined their open transaction (opengroup.go)
	deadlocks atomic.Int64 // commit transactions and age passes PostgreSQL ended to break a deadlock
	prelocks  atomic.Int64 // commit transactions that locked their counts first (prelock.go)
	// afterOpen, when set (by tests), runs in commitOpen after the group's
	// statements, before it takes the late arrivals.
	afterOpen atomic.Pointer[func()]

	cached  atomic.Int64   // commits written from known records, without a read
	knownMu sync.Mutex     // guards known
	known   map[string]row // records this Store wrote not terminal, as written: see known.go

	// The age limit's passes (age.go).
	ageNext   atomic.Int64       // Unix ns from which a commit checks the age limit again: see ageDue
	ageBusy   atomic.Bool        // a pass runs
	agePasses atomic.Int64       // passes that committed
	ageCtx    context.Context    // a pass's; Close cancels it
	ageStop   context.CancelFunc // cancels ageCtx
	ageWG     sync.WaitGroup     // the running pass, which Close waits for

	scope    scope         // the channels and lock keys of the schema (scope.go)
	settled  settledFuncs  // OnSettled's functions (settle.go)
	cursor   settledCursor // what settled and was told (catchup.go)
	msgWaits messageWaits  // senders waiting for their messages (messages.go)

	mu      sync.Mutex // guards the fields below
	closed  bool
	started bool
	rt      store.Runtime // the started instance's runtime; nil before Start
	stop    context.CancelFunc
	wg      sync.WaitGroup // the background goroutines of Start
}

// BackgroundAppName is the application_name of the connections of the
// heartbeat, the reaper, the cancel poller and the age limit's deletes,
// followed by nothing: an
// operator can tell them from commit traffic in pg_stat_activity.
const BackgroundAppName = "bgtask-background"

// bgConns is the size of the background pool: one connection for each of
// the heartbeat, the reaper, the cancel poller and the age limit's pass,
// which each hold at most one at a time.
const bgConns = 4

// Open connects to the database named by dsn (a PostgreSQL URL or
// key=value string, as pgxpool.ParseConfig reads it, pool settings such as
// pool_max_conns included), applies the schema migrations the database
// lacks, and returns a Store. The pool dsn describes serves commits and
// reads; the heartbeat, the reaper and the cancel poller of a started
// Store use three more connections of their own, the cancel listener one
// more, and the age limit's deletes (WithRetainFor) one more, which a
// Store holds only while it deletes, so they never wait behind commits. Each connection of the
// commit pool prepares the statements of a commit once; a DSN that names
// default_query_exec_mode (as for a pooler that does not keep prepared
// statements) prepares nothing and runs in that mode. The tables live in
// the first schema of the DSN's search_path that exists; the Store's
// NOTIFY channels and advisory locks are keyed by it, so fleets in two
// schemas of one database neither hear nor lock each other (scope.go). A
// database migrated by a newer version of this package is left untouched
// and Open returns an error matching ErrSchemaTooNew.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var migrated atomic.Bool
	if !strings.Contains(dsn, "default_query_exec_mode") {
		// The hot statements are prepared on each connection once the
		// schema is there; their generic plans use indexes. The others are
		// planned for the values of each call (unnamed statements,
		// described once), so no plan cached while the table was small
		// keeps scanning it whole after it grew.
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		pc.AfterConnect = prepareHot(&migrated)
	}
	bc := pc.Copy()
	bc.AfterConnect = nil
	bc.MaxConns, bc.MinConns = bgConns, 0
	bc.ConnConfig.RuntimeParams["application_name"] = BackgroundAppName
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	bg, err := pgxpool.NewWithConfig(ctx, bc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		bg.Close()
		return nil, err
	}
	sc, err := readScope(ctx, pool)
	if err != nil {
		pool.Close()
		bg.Close()
		return nil, err
	}
	if pc.AfterConnect != nil {
		// The connections made before the schema existed go; the new
		// ones prepare the hot statements.
		migrated.Store(true)
		pool.Reset()
	}
	now := time.Now()
	s := &Store{pool: pool, bg: bg, cfg: cfg, scope: sc, log: cfg.logger, clock: time.Now, base: now,
		lostWake: make(chan struct{}, 1), known: make(map[string]row)}
	s.group.limit = int(min(maxInFlight, pc.MaxConns))
	s.ageCtx, s.ageStop = context.WithCancel(context.Background())
	return s, nil
}

// Close stops what Start started, marks the instance stopped (so any
// reaper interrupts the tasks it still has as running), and closes the
// connections. Shut the Manager down first: Close does not wait for its
// tasks. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop := s.stop
	s.mu.Unlock()
	s.ageStop()
	s.ageWG.Wait()
	var err error
	if stop != nil {
		stop()
		s.wg.Wait()
		if instance := *s.instance.Load(); !s.lost.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.grace)
			_, err = s.bg.Exec(ctx, `UPDATE bgtask_instances SET state = 'stopped' WHERE id = $1 AND state = 'alive' AND token = $2`, instance, s.token)
			cancel()
			if err != nil {
				err = fmt.Errorf("pgstore: close: mark instance %q stopped: %w", instance, err)
			}
		}
	}
	s.pool.Close()
	s.bg.Close()
	return err
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

var _ store.SharedStore = (*Store)(nil)

// WaitingTasks implements store.KindQueue: up to limit records of
// resumable tasks that wait in the queue for a live instance to claim
// them (after their instance was reaped, or stopped), oldest first. A
// corrupt row is skipped and named in the returned error.
func (s *Store) WaitingTasks(ctx context.Context, limit int) ([]bgtype.TaskMeta, error) {
	rs, err := s.pool.Query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks
		WHERE resume IS NOT NULL AND status = 'queued' AND instance = ''
		ORDER BY created_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: waiting tasks: %w", err)
	}
	defer rs.Close()
	var (
		out     []bgtype.TaskMeta
		corrupt []error
	)
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil {
			corrupt = append(corrupt, err)
			continue
		}
		out = append(out, r.meta)
	}
	if err := rs.Err(); err != nil {
		return out, fmt.Errorf("pgstore: waiting tasks: %w", err)
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("pgstore: waiting tasks skipped corrupt rows: %w", errors.Join(corrupt...))
	}
	return out, nil
}

var _ store.KindQueue = (*Store)(nil)
