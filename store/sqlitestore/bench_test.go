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

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/sqlitestore"
	"github.com/bgtask/bgtask/store/storetest"
)

// BenchmarkSQLiteCommit measures metadata upserts per second on a file
// database with the default options (WAL, synchronous=NORMAL, retention
// 1000 per owner). Each op is one Commit of one Upsert, alternately a new
// running task and its completion, as a Manager writes them. "single" is one
// writer; "writers=8" is 8 goroutines committing at once, which the writer
// merges into shared transactions. "/announced" adds the third commit a
// Manager makes of each task, its Announce once the owner's loop took the
// terminal event: each op is then one of the three. "/timeids" gives the
// tasks ids that grow with time across owners, as a Manager's UUIDv7 ids
// do, instead of ids grouped by owner: the rows of one transaction then
// share the table's last pages.
//
//	cd store/sqlitestore && go test -run '^$' -bench SQLiteCommit -benchtime 3s
func BenchmarkSQLiteCommit(b *testing.B) {
	for _, bc := range []struct {
		name      string
		writers   int
		announced bool
		opts      []sqlitestore.Option
		timeIDs   bool
	}{
		{"single", 1, false, nil, false},
		{"writers=8", 8, false, nil, false},
		{"single/fullsync", 1, false, []sqlitestore.Option{sqlitestore.WithFullSync()}, false},
		{"writers=8/fullsync", 8, false, []sqlitestore.Option{sqlitestore.WithFullSync()}, false},
		{"single/announced", 1, true, nil, false},
		{"writers=8/announced", 8, true, nil, false},
		{"writers=8/timeids", 8, false, nil, true},
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
			var made atomic.Int64
			for w := range bc.writers {
				owner := fmt.Sprintf("owner-%d", w)
				id := func(n int) string { return fmt.Sprintf("task_%s_%09d", owner, n) }
				if bc.timeIDs {
					id = func(int) string { return fmt.Sprintf("task_%032x", made.Add(1)) }
				}
				wg.Go(func() { upsertLoop(b, s, owner, id, bc.announced, work) })
			}
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				work <- struct{}{} // one upsert, by whichever writer is free
			}
			close(work)
			wg.Wait()
			cpu.report(b)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "upserts/s")
			b.ReportMetric(float64(b.N)/float64(max(txs.Load(), 1)), "rows/tx")
		})
	}
}

// upsertLoop commits one action per token: a new running task, then its
// completion, then (if announced) its Announce. id(n) is the id of the task
// made at the n-th token.
func upsertLoop(b *testing.B, s store.Store, owner string, id func(n int) string, announced bool, work <-chan struct{}) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	result := json.RawMessage(`{"summary":"three sources agree"}`)
	steps := 2
	if announced {
		steps = 3
	}
	var m bgtype.TaskMeta
	n := 0
	for range work {
		var a store.Action
		switch n % steps {
		case 0:
			m = bgtype.TaskMeta{
				ID: id(n), Owner: owner, Type: bgtype.TypeTask,
				Name: "research", Status: bgtype.StatusRunning, CreatedAt: now, StartedAt: now, Instance: "bench",
			}
			a = store.UpsertAction(m)
		case 1:
			m.Status, m.Result, m.FinishedAt = bgtype.StatusCompleted, result, now
			a = store.UpsertAction(m)
		default:
			a = store.AnnounceAction(m.ID)
		}
		if err := s.Commit(b.Context(), owner, a); err != nil {
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
// "tx=64rows" one per 8 and 64 rows; each op is one row. These rows are of
// one owner and leave the terminal columns empty, so a transaction touches
// few pages; "/ended" fills terminal_seq and terminal_at at completion as
// the store does (and so writes their indexes), and "owners=8" takes the
// rows of 8 owners in turn, as a transaction of 8 writers holds them.
// "/timeids" takes the ids of BenchmarkSQLiteCommit/writers=8/timeids.
//
//	cd store/sqlitestore && go test -run '^$' -bench 'SQLiteCommit|SQLiteRaw' -benchtime 3s
func BenchmarkSQLiteRaw(b *testing.B) {
	for _, bc := range []struct {
		name    string
		rows    int
		owners  int  // rows of this many owners, in turn, each alternately a new task and its completion
		ended   bool // a completion sets terminal_seq and terminal_at, as the store's does
		retain  bool // a completion over the owner's limit deletes its oldest terminal row, as the store's does
		fsync   string
		timeIDs bool // ids that grow with time across owners
	}{
		{"tx=1row", 1, 1, false, false, "NORMAL", false},
		{"tx=8rows", 8, 1, false, false, "NORMAL", false}, // the most a transaction of 8 writers holds
		{"tx=64rows", 64, 1, false, false, "NORMAL", false},
		{"tx=1row/fullsync", 1, 1, false, false, "FULL", false},
		{"tx=64rows/fullsync", 64, 1, false, false, "FULL", false},
		// The rows of BenchmarkSQLiteCommit/writers=8 when each transaction
		// holds one row of each of the 8 writers: 8 owners, half of them
		// completions that fill the terminal columns (and so their indexes).
		{"tx=8rows/owners=8/ended", 8, 8, true, false, "NORMAL", false},
		// What BenchmarkSQLiteCommit/writers=8 writes, retention included:
		// the hand-written floor of its transactions.
		{"tx=8rows/owners=8/ended/retained", 8, 8, true, true, "NORMAL", false},
		{"tx=8rows/owners=8/ended/retained/timeids", 8, 8, true, true, "NORMAL", true},
		{"tx=1row/ended", 1, 1, true, false, "NORMAL", false},
		// What BenchmarkSQLiteCommit/single writes, retention included: at
		// the default limit, every completion deletes the owner's oldest
		// terminal row (the row and its index entries).
		{"tx=1row/ended/retained", 1, 1, true, true, "NORMAL", false},
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
			query := `INSERT INTO tasks
				(id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance, attempt)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at`
			if bc.ended {
				query = `INSERT INTO tasks
				(id, owner, task_type, name, status, result, created_at, started_at, finished_at, instance, attempt, terminal_seq, terminal_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, finished_at = excluded.finished_at,
				terminal_seq = excluded.terminal_seq, terminal_at = excluded.terminal_at`
			}
			ins, err := db.PrepareContext(b.Context(), query)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			drop, err := db.PrepareContext(b.Context(), `DELETE FROM tasks WHERE id IN (
				SELECT id FROM tasks WHERE owner = ?1 AND terminal_seq IS NOT NULL ORDER BY terminal_seq LIMIT ?2)`)
			if err != nil {
				b.Fatal(err)
			}
			defer drop.Close()
			terminals := make(map[string]int) // per owner, as the store counts them
			now := time.Now().UnixMicro()
			result := `{"summary":"three sources agree"}`
			var (
				tx   *sql.Tx
				stmt *sql.Stmt // ins, bound to tx
			)
			n := 0
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if tx == nil {
					if tx, err = db.BeginTx(b.Context(), nil); err != nil {
						b.Fatal(err)
					}
					stmt = tx.StmtContext(b.Context(), ins)
				}
				w, step := n%bc.owners, n/bc.owners // owner w's step-th row
				owner := fmt.Sprintf("owner-%d", w)
				id := fmt.Sprintf("task_%s_%09d", owner, step/2)
				if bc.timeIDs {
					id = fmt.Sprintf("task_%032x", n-step%2*bc.owners+1) // the n of the task's first row
				}
				args := []any{id, owner, bgtype.TypeTask, "research", "running", nil, now, now, nil, "bench"}
				if step%2 == 1 {
					args[4], args[5], args[8] = "completed", result, now
				}
				if bc.ended {
					var seq, at any // NULL while running
					if step%2 == 1 {
						seq, at = n, now
					}
					args = append(args, seq, at)
				}
				_, err = stmt.ExecContext(b.Context(), args...)
				if err != nil {
					b.Fatal(err)
				}
				if bc.retain && step%2 == 1 {
					if terminals[owner]++; terminals[owner] > memstore.DefaultRetainPerOwner {
						if _, err := tx.StmtContext(b.Context(), drop).ExecContext(b.Context(), owner, terminals[owner]-memstore.DefaultRetainPerOwner); err != nil {
							b.Fatal(err)
						}
						terminals[owner] = memstore.DefaultRetainPerOwner
					}
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
			cpu.report(b)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// cpuSpan is the CPU time at the start of a benchmark's loop.
type cpuSpan struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuSpan {
	t, ok := cpuTime()
	return cpuSpan{t, ok}
}

// report reports the process's CPU time per op since the span started (all
// goroutines: the writer's and SQLite's work too).
func (c cpuSpan) report(b *testing.B) {
	if t, ok := cpuTime(); ok && c.ok {
		b.ReportMetric(float64(t-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkRestore10k is Manager.Restore after a crash that left 10,000
// records of one owner running in the database file: each op interrupts
// all of them and delivers their events. Filling the file is not timed.
//
//	cd store/sqlitestore && go test -run '^$' -bench Restore10k -benchtime 5x
func BenchmarkRestore10k(b *testing.B) {
	storetest.BenchRestoreSeeded(b, 10_000, func(b *testing.B, seed func(store.Store)) store.Store {
		// The crashed process's Store writes the records and is gone; the
		// next one opens the file without recovery, so that Restore has
		// them all to do.
		path := filepath.Join(b.TempDir(), "restore.db")
		gone, err := sqlitestore.Open(b.Context(), path)
		if err != nil {
			b.Fatal(err)
		}
		seed(gone)
		if err := gone.Close(); err != nil {
			b.Fatal(err)
		}
		s, err := sqlitestore.Open(b.Context(), path, sqlitestore.WithoutRecovery())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
