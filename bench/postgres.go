package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func postgresGroup(sz sizes) *group {
	return &group{
		name: "PostgreSQL",
		rows: []row{
			{name: "PostgreSQL commit, 1 row", unit: perRow, ratios: true},
			{name: fmt.Sprintf("PostgreSQL commit, %d rows, per row", sz.batch), unit: perRow, ratios: true},
			{name: "PostgreSQL commit, 1 row, vs raw on the store's schema", unit: perRow, ratios: true},
			{name: fmt.Sprintf("PostgreSQL commit, %d rows, per row, vs raw on the store's schema", sz.batch), unit: perRow, ratios: true},
		},
		runs: [nCols]runFunc{colBgtask: bgPostgres, colRaw: rawPostgres},
		skip: func(cfg config) string {
			if cfg.dsn == "" {
				return "no DSN"
			}
			return ""
		},
		legend: "a new schema each time in the database of -dsn (or $" + envDSN + "), dropped afterwards; commits alternate between new running tasks and their completion, one writer; " +
			"bgtask: pgstore's Commit of 1, then " + fmt.Sprint(sz.batch) + " Upserts; raw: a pgx.Batch of 1, then " + fmt.Sprint(sz.batch) + " INSERT ... ON CONFLICT DO UPDATE on a pgxpool, " +
			"on a table with one index; the last two rows' raw side writes the same upserts into the store's own table (made by pgstore.Open: its indexes and triggers), " +
			"a completion setting the column retention orders by",
	}
}

// newSchema creates a schema for one measurement and returns a DSN whose
// search_path is it, and a function that drops it.
func newSchema(ctx context.Context, dsn string) (string, func() error, error) {
	name := fmt.Sprintf("bgtask_bench_%d_%d", os.Getpid(), time.Now().UnixNano())
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + name); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() error { return exec("DROP SCHEMA " + name + " CASCADE") }
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", nil, errors.Join(err, drop())
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String(), drop, nil
	}
	return dsn + " search_path=" + name, drop, nil
}

// inSchema runs f with the DSN of a new schema and drops it afterwards.
func inSchema(ctx context.Context, cfg config, f func(dsn string) (sample, error)) (sample, error) {
	dsn, drop, err := newSchema(ctx, cfg.dsn)
	if err != nil {
		return sample{}, err
	}
	s, err := f(dsn)
	if derr := drop(); err == nil && derr != nil {
		err = fmt.Errorf("drop schema: %w", derr)
	}
	return s, err
}

func bgPostgres(ctx context.Context, cfg config) ([]sample, error) {
	var ss []sample
	for _, batch := range []int{1, cfg.sz.batch} {
		s, err := inSchema(ctx, cfg, func(dsn string) (sample, error) {
			st, err := pgstore.Open(ctx, dsn)
			if err != nil {
				return sample{}, err
			}
			defer st.Close()
			gen := newRecordGen("owner-0")
			commits := pgCommits(cfg, batch)
			return timed(commits*batch, func() error {
				for range commits {
					if err := st.Commit(ctx, gen.owner, upserts(gen.batch(batch))...); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
		ss = append(ss, s)
	}
	return append(ss, ss...), nil // the store's side of the rows on its own schema
}

// pgCommits is how many commits of batch rows a PostgreSQL sample makes.
func pgCommits(cfg config, batch int) int {
	if batch == 1 {
		return cfg.sz.sqlCommits
	}
	return batchRows(cfg) / batch
}

const rawPostgresSchema = `CREATE TABLE tasks (
	id          text        NOT NULL PRIMARY KEY,
	owner       text        NOT NULL,
	task_type   text        NOT NULL,
	name        text        NOT NULL,
	status      text        NOT NULL,
	result      jsonb,
	created_at  timestamptz,
	started_at  timestamptz,
	finished_at timestamptz,
	instance    text        NOT NULL
);
CREATE INDEX tasks_owner_status ON tasks (owner, status)`

const rawPostgresUpsert = `INSERT INTO tasks (id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at`

func rawPostgres(ctx context.Context, cfg config) ([]sample, error) {
	var ss []sample
	for _, batch := range []int{1, cfg.sz.batch} {
		s, err := inSchema(ctx, cfg, func(dsn string) (sample, error) {
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				return sample{}, err
			}
			defer pool.Close()
			if _, err := pool.Exec(ctx, rawPostgresSchema); err != nil {
				return sample{}, err
			}
			return rawUpserts(ctx, cfg, pool, batch, rawPostgresUpsert)
		})
		if err != nil {
			return nil, err
		}
		ss = append(ss, s)
	}
	for _, batch := range []int{1, cfg.sz.batch} {
		s, err := inSchema(ctx, cfg, func(dsn string) (sample, error) { return rawPostgresStore(ctx, cfg, dsn, batch) })
		if err != nil {
			return nil, err
		}
		ss = append(ss, s)
	}
	return ss, nil
}

// rawStorePostgresUpsert writes a row of the store's own table, setting
// terminal_at (the column retention orders by) when the task ends.
const rawStorePostgresUpsert = `INSERT INTO bgtask_tasks (id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance, terminal_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, CASE WHEN $5 IN ('completed', 'failed', 'cancelled', 'interrupted') THEN clock_timestamp() END)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at, terminal_at = excluded.terminal_at`

// rawPostgresStore is rawPostgres's upserts of batch rows a commit into
// the table pgstore.Open makes in dsn's schema.
func rawPostgresStore(ctx context.Context, cfg config, dsn string, batch int) (sample, error) {
	st, err := pgstore.Open(ctx, dsn) // the schema
	if err != nil {
		return sample{}, err
	}
	if err := st.Close(); err != nil {
		return sample{}, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	return rawUpserts(ctx, cfg, pool, batch, rawStorePostgresUpsert)
}

// rawUpserts times commits of batch rows each, one pgx.Batch of query (an
// INSERT ... ON CONFLICT DO UPDATE of the ten columns in order) per commit,
// rows alternately a new running task and its completion.
func rawUpserts(ctx context.Context, cfg config, pool *pgxpool.Pool, batch int, query string) (sample, error) {
	gen := newRecordGen("owner-0")
	commits := pgCommits(cfg, batch)
	return timed(commits*batch, func() error {
		for range commits {
			var b pgx.Batch
			for _, m := range gen.batch(batch) {
				b.Queue(query, m.ID, m.Owner, string(m.Type), m.Name, string(m.Status), resultText(m),
					pgTime(m.CreatedAt), pgTime(m.StartedAt), pgTime(m.FinishedAt), m.Instance)
			}
			if err := pool.SendBatch(ctx, &b).Close(); err != nil {
				return err
			}
		}
		return nil
	})
}

// pgTime is t, or NULL when unset.
func pgTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
