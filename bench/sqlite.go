package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/bgtask/bgtask/store/sqlitestore"
	_ "modernc.org/sqlite" // the driver sqlitestore uses, for the raw rows
)

func sqliteGroup(sz sizes) *group {
	return &group{
		name: "SQLite",
		rows: []row{
			{name: "SQLite commit, 1 writer, 1 row per commit", unit: perRow, ratios: true},
			{name: fmt.Sprintf("SQLite commit, %d writers, per row", sz.writers), unit: perRow, ratios: true},
			{name: fmt.Sprintf("SQLite commit, %d writers, per row, vs raw rows of %d owners on the store's schema", sz.writers, sz.writers), unit: perRow, ratios: true},
		},
		runs: [nCols]runFunc{colBgtask: bgSQLite, colRaw: rawSQLite},
		legend: "a new file in a temporary directory each time, WAL, synchronous=NORMAL; rows alternate between new running tasks and their completion; " +
			"bgtask: sqlitestore's Commit of one Upsert, from 1 goroutine, then from " + fmt.Sprint(sz.writers) + " at once (it merges them into shared transactions); " +
			"raw: database/sql on the same driver and settings, INSERT ... ON CONFLICT DO UPDATE in a one-row transaction, then " + fmt.Sprint(sz.batch) + " in one transaction, " +
			"on a table with one index; the last row's raw side writes what a transaction of the " + fmt.Sprint(sz.writers) + " writers holds: one row of each of " + fmt.Sprint(sz.writers) + " owners, " +
			"on the store's own schema (made by sqlitestore.Open), a completion setting the columns retention orders by",
	}
}

// tempDB returns a path for a new database file and a function that
// removes its directory.
func tempDB() (string, func(), error) {
	dir, err := os.MkdirTemp("", "bgtask-bench-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
}

func bgSQLite(ctx context.Context, cfg config) ([]sample, error) {
	single, err := bgSQLiteRun(ctx, cfg.sz.sqlCommits, 1)
	if err != nil {
		return nil, err
	}
	many, err := bgSQLiteRun(ctx, batchRows(cfg), cfg.sz.writers)
	return []sample{single, many, many}, err
}

// batchRows is how many rows the batched and concurrent store rows write.
func batchRows(cfg config) int {
	return max(1, cfg.sz.sqlCommits*4/cfg.sz.batch) * cfg.sz.batch
}

// bgSQLiteRun commits rows one-row commits from writers goroutines at once,
// each for its own owner.
func bgSQLiteRun(ctx context.Context, rows, writers int) (sample, error) {
	path, remove, err := tempDB()
	if err != nil {
		return sample{}, err
	}
	defer remove()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		return sample{}, err
	}
	defer st.Close()
	per := rows / writers
	return timed(per*writers, func() error {
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				gen := newRecordGen(fmt.Sprint("owner-", w))
				for range per {
					if err := st.Commit(ctx, gen.owner, upserts(gen.batch(1))...); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
}

const rawSQLiteSchema = `CREATE TABLE tasks (
	id          TEXT    NOT NULL PRIMARY KEY,
	owner       TEXT    NOT NULL,
	task_type   TEXT    NOT NULL,
	name        TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	result      TEXT,
	created_at  INTEGER,
	started_at  INTEGER,
	finished_at INTEGER,
	instance    TEXT    NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX tasks_owner_status ON tasks (owner, status);`

const rawSQLiteUpsert = `INSERT INTO tasks (id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at`

func rawSQLite(ctx context.Context, cfg config) ([]sample, error) {
	single, err := rawSQLiteRun(ctx, cfg.sz.sqlCommits, 1)
	if err != nil {
		return nil, err
	}
	many, err := rawSQLiteRun(ctx, batchRows(cfg), cfg.sz.batch)
	if err != nil {
		return nil, err
	}
	owners, err := rawSQLiteOwnersRun(ctx, batchRows(cfg), cfg.sz.writers)
	return []sample{single, many, owners}, err
}

// rawSQLiteRun writes rows rows in transactions of batch rows each, with
// the driver and settings sqlitestore uses.
func rawSQLiteRun(ctx context.Context, rows, batch int) (sample, error) {
	path, remove, err := tempDB()
	if err != nil {
		return sample{}, err
	}
	defer remove()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return sample{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, rawSQLiteSchema); err != nil {
		return sample{}, err
	}
	stmt, err := db.PrepareContext(ctx, rawSQLiteUpsert)
	if err != nil {
		return sample{}, err
	}
	defer stmt.Close()
	gen := newRecordGen("owner-0")
	txs := rows / batch
	return timed(txs*batch, func() error {
		for range txs {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			ts := tx.StmtContext(ctx, stmt)
			for _, m := range gen.batch(batch) {
				if _, err := ts.ExecContext(ctx, m.ID, m.Owner, m.Type, m.Name, string(m.Status), resultText(m),
					micros(m.CreatedAt), micros(m.StartedAt), micros(m.FinishedAt), m.Instance); err != nil {
					tx.Rollback()
					return err
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
		}
		return nil
	})
}

// rawStoreUpsert writes a row of the store's own schema, with the terminal
// columns that its retention orders by (NULL while the task runs).
const rawStoreUpsert = `INSERT INTO tasks (id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance, terminal_seq, terminal_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at,
	terminal_seq = excluded.terminal_seq, terminal_at = excluded.terminal_at`

// rawSQLiteOwnersRun writes rows rows on the schema sqlitestore makes, in
// transactions of one row of each of owners owners (alternately their new
// running task and its completion), as the store's writer merges the
// commits of that many concurrent writers.
func rawSQLiteOwnersRun(ctx context.Context, rows, owners int) (sample, error) {
	path, remove, err := tempDB()
	if err != nil {
		return sample{}, err
	}
	defer remove()
	st, err := sqlitestore.Open(ctx, path) // the schema, in WAL mode
	if err != nil {
		return sample{}, err
	}
	if err := st.Close(); err != nil {
		return sample{}, err
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return sample{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmt, err := db.PrepareContext(ctx, rawStoreUpsert)
	if err != nil {
		return sample{}, err
	}
	defer stmt.Close()
	gens := make([]*recordGen, owners)
	for w := range gens {
		gens[w] = newRecordGen(fmt.Sprint("owner-", w))
	}
	txs, seq := rows/owners, 0
	return timed(txs*owners, func() error {
		for range txs {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			ts := tx.StmtContext(ctx, stmt)
			for _, g := range gens {
				m := g.batch(1)[0]
				var tseq, tat any // NULL while running
				if m.Status.IsTerminal() {
					seq++
					tseq, tat = seq, g.now.UnixMicro()
				}
				if _, err := ts.ExecContext(ctx, m.ID, m.Owner, m.Type, m.Name, string(m.Status), resultText(m),
					micros(m.CreatedAt), micros(m.StartedAt), micros(m.FinishedAt), m.Instance, tseq, tat); err != nil {
					tx.Rollback()
					return err
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
		}
		return nil
	})
}
