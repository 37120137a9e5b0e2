package sqlitestore_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
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
			s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), bc.opts...)
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
