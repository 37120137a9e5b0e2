package sqlitestore_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/storetest"
)

// BenchmarkSQLiteCommit measures metadata upserts per second on a file
// database with the default options (WAL, synchronous=NORMAL, retention
// 1000 per owner). Each op is one Commit of one Upsert, alternately a new
// running task and its completion, as a Manager writes them. "single" is one
// writer; "writers=8" is 8 goroutines committing at once, which the writer
// merges into shared transactions.
//
//	cd store/sqlitestore && go test -run '^$' -bench SQLiteCommit -benchtime 3s
func BenchmarkSQLiteCommit(b *testing.B) {
	for _, bc := range []struct {
		name    string
		writers int
		opts    []sqlitestore.Option
	}{
		{"single", 1, nil},
		{"writers=8", 8, nil},
		{"single/fullsync", 1, []sqlitestore.Option{sqlitestore.WithFullSync()}},
		{"writers=8/fullsync", 8, []sqlitestore.Option{sqlitestore.WithFullSync()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var txs atomic.Int64 // the writer's batches: one transaction each
			opts := append(slices.Clip(bc.opts), sqlitestore.WithHookTaken(func(int) { txs.Add(1) }))
			s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			work := make(chan struct{})
			var wg sync.WaitGroup
			for w := range bc.writers {
				wg.Go(func() { upsertLoop(b, s, fmt.Sprintf("owner-%d", w), work) })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				work <- struct{}{} // one upsert, by whichever writer is free
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "upserts/s")
			b.ReportMetric(float64(b.N)/float64(max(txs.Load(), 1)), "rows/tx")
		})
	}
}

// upsertLoop commits one upsert per token: a new running task, then its
// completion.
func upsertLoop(b *testing.B, s bgtask.Store, owner string, work <-chan struct{}) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	result := json.RawMessage(`{"summary":"three sources agree"}`)
	var m bgtask.TaskMeta
	n := 0
	for range work {
		if n%2 == 0 {
			m = bgtask.TaskMeta{
				ID: fmt.Sprintf("task_%s_%09d", owner, n), Owner: owner, Type: bgtask.TypeTask,
				Name: "research", Status: bgtask.StatusRunning, CreatedAt: now, StartedAt: now, Instance: "bench",
			}
		} else {
			m.Status, m.Result, m.FinishedAt = bgtask.StatusCompleted, result, now
		}
		if err := s.Commit(b.Context(), owner, bgtask.Upsert(m)); err != nil {
			b.Error(err)
			return
		}
		n++
	}
}

// BenchmarkSQLiteRaw is the floor BenchmarkSQLiteCommit is measured
// against: the same file settings as the store's (WAL, synchronous=NORMAL,
// its busy timeout, immediate transactions), the same schema (made by
// Open), and the same rows, alternately a new running task and its
// completion, written by one prepared INSERT ... ON CONFLICT DO UPDATE with
// nothing around it. "tx=1row" is one transaction per row, "tx=8rows" and
// "tx=64rows" one per 8 and 64 rows; each op is one row.
//
//	cd store/sqlitestore && go test -run '^$' -bench 'SQLiteCommit|SQLiteRaw' -benchtime 3s
func BenchmarkSQLiteRaw(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rows  int
		fsync string
	}{
		{"tx=1row", 1, "NORMAL"},
		{"tx=8rows", 8, "NORMAL"}, // the most a transaction of 8 writers holds
		{"tx=64rows", 64, "NORMAL"},
		{"tx=1row/fullsync", 1, "FULL"},
		{"tx=64rows/fullsync", 64, "FULL"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "raw.db")
			s, err := sqlitestore.Open(b.Context(), path) // the schema, in WAL mode
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
			db, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_txlock=immediate",
				path, sqlitestore.DefaultBusyTimeout.Milliseconds(), bc.fsync))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			ins, err := db.PrepareContext(b.Context(), `INSERT INTO tasks
				(id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance, attempt)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at`)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			now := time.Now().UnixMicro()
			result := `{"summary":"three sources agree"}`
			var (
				tx   *sql.Tx
				stmt *sql.Stmt // ins, bound to tx
			)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if tx == nil {
					if tx, err = db.BeginTx(b.Context(), nil); err != nil {
						b.Fatal(err)
					}
					stmt = tx.StmtContext(b.Context(), ins)
				}
				id := fmt.Sprintf("task_raw_%09d", n/2)
				if n%2 == 0 {
					_, err = stmt.ExecContext(b.Context(), id, "owner-0", bgtask.TypeTask, "research", "running", nil, now, now, nil, "bench")
				} else {
					_, err = stmt.ExecContext(b.Context(), id, "owner-0", bgtask.TypeTask, "research", "completed", result, now, now, now, "bench")
				}
				if err != nil {
					b.Fatal(err)
				}
				n++
				if n%bc.rows == 0 {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					tx = nil
				}
			}
			if tx != nil {
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkRestore10k is Manager.Restore after a crash that left 10,000
// records of one owner running in the database file: each op interrupts
// all of them and delivers their events. Filling the file is not timed.
//
//	cd store/sqlitestore && go test -run '^$' -bench Restore10k -benchtime 5x
func BenchmarkRestore10k(b *testing.B) {
	storetest.BenchRestore(b, 10_000, func(b *testing.B) bgtask.Store {
		s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "restore.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
