package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooOld is returned by OpenReadOnly when the database was
// migrated by an older version of this package, or never: Open by the
// application migrates it; OpenReadOnly never does.
var ErrSchemaTooOld = errors.New("pgstore: database schema is older than this code")

// ReadOnlyAppName is the application_name of a ReadOnly's connections.
const ReadOnlyAppName = "bgtask-readonly"

// ReadOnly reads the tasks of a database that Stores share, across owners,
// for an operator's tool such as an inspector, while the applications run.
// It never migrates, registers no instance, starts nothing in the
// background and writes nothing except a cancel request (RequestCancel):
// its connections run with default_transaction_read_only, and the cancel
// request is the one read-write transaction.
//
// It is not a store.Store: it cannot be given to a Manager, and no owner's
// view reaches it. Use OpenReadOnly; the zero value is not usable. Methods
// are safe for concurrent use and return ctx's error when ctx ends first.
// After Close they return ErrClosed.
type ReadOnly struct {
	pool   *pgxpool.Pool
	scope  scope // the cancel channel of the schema (scope.go)
	closed atomic.Bool
}

// OpenReadOnly connects to the database named by dsn (as Open reads it)
// and checks its schema version: a newer one than this code's gives an
// error matching ErrSchemaTooNew, an older one (or none) an error matching
// ErrSchemaTooOld that says to run the application once, so that it
// migrates the database. A DSN that cannot be parsed or a server that
// cannot be reached is an error too. No option of Open applies; ctx bounds
// the connection and the check.
func OpenReadOnly(ctx context.Context, dsn string) (*ReadOnly, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	pc.MaxConns = 2
	pc.MinConns = 0
	pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pc.ConnConfig.RuntimeParams["application_name"] = ReadOnlyAppName
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := checkReadOnlyVersion(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	sc, err := readScope(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &ReadOnly{pool: pool, scope: sc}, nil
}

func checkReadOnlyVersion(ctx context.Context, pool *pgxpool.Pool) error {
	v := -1
	var exists bool
	err := pool.QueryRow(ctx, `SELECT to_regclass('bgtask_schema_migrations') IS NOT NULL`).Scan(&exists)
	if err == nil && exists {
		err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM bgtask_schema_migrations`).Scan(&v)
	}
	if err != nil {
		return fmt.Errorf("pgstore: read schema version: %w", err)
	}
	switch {
	case v < 0:
		return fmt.Errorf("%w: the database holds no bgtask schema; run the application once to create it", ErrSchemaTooOld)
	case v > SchemaVersion:
		return fmt.Errorf("%w: database is at schema version %d, this code knows versions up to %d; upgrade the code", ErrSchemaTooNew, v, SchemaVersion)
	case v < SchemaVersion:
		return fmt.Errorf("%w: database is at schema version %d, this code reads %d; run the application once to migrate it", ErrSchemaTooOld, v, SchemaVersion)
	}
	return nil
}

// Close closes the connections. It is idempotent.
func (r *ReadOnly) Close() error {
	if !r.closed.Swap(true) {
		r.pool.Close()
	}
	return nil
}

func (r *ReadOnly) query(ctx context.Context, sql string, args ...any) ([]row, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	rs, err := r.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return collect(rs)
}

// Get returns one task's record, whoever owns it, or an error matching
// bgtype.ErrNotFound.
func (r *ReadOnly) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	rows, err := r.query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks WHERE id = $1`, id)
	if err != nil {
		return bgtype.TaskMeta{}, err
	}
	if len(rows) == 0 {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
	}
	return rows[0].meta, nil
}

// Children yields the records whose parent is task id, whoever owns them,
// oldest first. An unknown id yields nothing.
func (r *ReadOnly) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if id == "" {
			return
		}
		rows, err := r.query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks
			WHERE parent_task_id = $1 ORDER BY created_at NULLS FIRST, id COLLATE "C"`, id)
		yieldRows(rows, err, yield)
	}
}

// Filter selects records for ReadOnly.List. The zero Filter selects every
// record. Each field that is set narrows the selection.
type Filter struct {
	Owner    string          // only this owner's records
	Statuses []bgtype.Status // only records in one of these statuses
	Tag      string          // only records carrying this tag
	RunID    string          // only records spawned in this run (Parent.RunID)
}

// listPage is how many rows one query of ReadOnly.List reads.
var listPage = 256

// List yields the records that f selects, whoever owns them, oldest first
// (CreatedAt, then ID). It reads them a page at a time, so a large table
// is never read into memory at once; a record written meanwhile may or may
// not be seen. A failure is yielded once, as the last pair; an unknown
// status in f yields an error matching bgtype.ErrInvalidStatus.
func (r *ReadOnly) List(ctx context.Context, f Filter) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		var where []string
		var args []any
		arg := func(v any) string {
			args = append(args, v)
			return "$" + strconv.Itoa(len(args))
		}
		if f.Owner != "" {
			where = append(where, "owner = "+arg(f.Owner))
		}
		if f.Tag != "" {
			where = append(where, "tags @> ARRAY["+arg(f.Tag)+"::text]")
		}
		if f.RunID != "" {
			where = append(where, "parent_run_id = "+arg(f.RunID))
		}
		if len(f.Statuses) > 0 {
			sts := make([]string, len(f.Statuses))
			for i, st := range f.Statuses {
				if !st.Valid() {
					yield(bgtype.TaskMeta{}, fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st))
					return
				}
				sts[i] = string(st)
			}
			where = append(where, "status = ANY("+arg(sts)+")")
		}
		// Keyset paging on (created_at, id); a missing creation time sorts first.
		const key = `coalesce(created_at, '-infinity'::timestamptz)`
		n := len(args)
		where = append(where, fmt.Sprintf(`(%s, id COLLATE "C") > ($%d, $%d COLLATE "C")`, key, n+1, n+2))
		query := `SELECT ` + taskCols + ` FROM bgtask_tasks WHERE ` + strings.Join(where, " AND ") +
			fmt.Sprintf(` ORDER BY %s, id COLLATE "C" LIMIT $%d`, key, n+3)
		lastAt := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		lastID := "" // no stored id is empty: the first key sorts before every record
		for {
			rows, err := r.query(ctx, query, append(args[:n:n], lastAt, lastID, listPage)...)
			if err != nil {
				yield(bgtype.TaskMeta{}, err)
				return
			}
			for i := range rows {
				if !yield(rows[i].meta, nil) {
					return
				}
			}
			if len(rows) < listPage {
				return
			}
			last := rows[len(rows)-1].meta
			lastID = last.ID
			lastAt = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
			if !last.CreatedAt.IsZero() {
				lastAt = pgtype.Timestamptz{Time: last.CreatedAt, Valid: true}
			}
		}
	}
}

// RequestCancel asks the instance that runs task id to cancel it, with its
// attached descendants there when tree is true, as Store.RequestCancel
// does, in the one read-write transaction a ReadOnly makes: a resumable
// task that waits in the queue is cancelled by the first started instance
// that reads the request, or, claimed meanwhile, by its claiming instance.
// It returns the task's record as read then: if its status is already
// terminal, nothing was recorded. An unknown id is an error matching
// bgtype.ErrNotFound. The request carries reason ("" for none): the
// cancelled record has it. It returns once the request is recorded, not
// when the task stops.
func (r *ReadOnly) RequestCancel(ctx context.Context, id string, tree bool, reason string) (bgtype.TaskMeta, error) {
	if r.closed.Load() {
		return bgtype.TaskMeta{}, ErrClosed
	}
	var m bgtype.TaskMeta
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		rs, err := tx.Query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks WHERE id = $1`, id)
		if err != nil {
			return err
		}
		rows, err := collect(rs)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
		}
		m = rows[0].meta
		if m.Status.IsTerminal() {
			return nil
		}
		tag, err := tx.Exec(ctx, requestCancelSQL, id, tree, liveStatuses, r.scope.cancel, reason)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// It ended since the read: report how.
			rs, err := tx.Query(ctx, `SELECT `+taskCols+` FROM bgtask_tasks WHERE id = $1`, id)
			if err != nil {
				return err
			}
			rows, err := collect(rs)
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return fmt.Errorf("%w: %s", bgtype.ErrNotFound, id)
			}
			m = rows[0].meta
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, bgtype.ErrNotFound) {
			return bgtype.TaskMeta{}, err
		}
		return bgtype.TaskMeta{}, fmt.Errorf("pgstore: request cancel of %s: %w", id, err)
	}
	return m, nil
}
