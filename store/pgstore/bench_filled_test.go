package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// filledOwners is how many owners the filled table's rows belong to.
const filledOwners = 1000

// BenchmarkPostgresFilled measures the commits of a task's life on a
// table filled first (with COPY, then vacuumed as autovacuum would) with
// rows terminal records spread over
// 1,000 owners, on a server with PostgreSQL's default settings: one
// iteration spawns a task (a running record) and completes it (which runs
// retention: every owner is at its limit of 1,000 kept records once the
// table holds 1,000,000). It reports each kind of commit's median and 99th
// percentile, and logs the plan of the retention statement, so that the
// costs at 1,000 rows and at 1,000,000 can be compared.
//
//	go test -run '^$' -bench BenchmarkPostgresFilled -benchtime 2000x ./store/pgstore
func BenchmarkPostgresFilled(b *testing.B) {
	for _, rows := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := b.Context()
			dsn := pgtest.NewDSN(b)
			s, err := pgstore.Open(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fill(b, dsn, rows)
			logPlan(b, dsn, pgstore.RetainCountSQL, []string{"owner_7"}, memstore.DefaultRetainPerOwner)
			var spawn, done []time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				owner := fmt.Sprintf("owner_%d", i%filledOwners)
				m := rec(fmt.Sprintf("task_new_%d", i), owner, bgtype.StatusRunning)
				start := time.Now()
				if err := s.Commit(ctx, owner, store.UpsertAction(m)); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				m.Status, m.FinishedAt, m.Result = bgtype.StatusCompleted, m.StartedAt.Add(time.Second), []byte(`"ok"`)
				if err := s.Commit(ctx, owner, store.UpsertAction(m)); err != nil {
					b.Fatal(err)
				}
				spawn, done = append(spawn, mid.Sub(start)), append(done, time.Since(mid))
				i++
			}
			report(b, "spawn", spawn)
			report(b, "complete", done)
		})
	}
}

// fill copies n terminal records, spread over filledOwners owners, into
// the Store's table.
func fill(b *testing.B, dsn string, n int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	t0 := time.Now().Add(-time.Hour)
	i := 0
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"bgtask_tasks"},
		[]string{"id", "owner", "task_type", "status", "instance", "created_at", "started_at", "finished_at", "result", "terminal_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == n {
				return nil, nil
			}
			at := t0.Add(time.Duration(i) * time.Microsecond)
			row := []any{fmt.Sprintf("task_fill_%d", i), fmt.Sprintf("owner_%d", i%filledOwners), "tool", "completed", "i1", at, at, at, `"ok"`, at}
			i++
			return row, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	// What autovacuum does on its own soon after a bulk load (its insert
	// threshold): without it the visibility map is empty and every index
	// walk also reads the heap.
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) bgtask_tasks`); err != nil {
		b.Fatal(err)
	}
}

// logPlan logs the plan and timing of one run of sql, rolled back.
func logPlan(b *testing.B, dsn, sql string, args ...any) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rs, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS, BUFFERS) "+sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	var plan []string
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			b.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rs.Err(); err != nil {
		b.Fatal(err)
	}
	b.Logf("plan:\n%s", joinLines(plan))
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// report adds the median and the 99th percentile of ds, in milliseconds.
func report(b *testing.B, what string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	ms := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), what+"-p50-ms")
	b.ReportMetric(ms(0.99), what+"-p99-ms")
}
