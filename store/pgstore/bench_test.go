package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// BenchmarkPostgresCommit measures metadata upserts per second: each
// commit inserts batch new running records; writers commit at once, each
// for its own owner (as runtime instances and agents do). One iteration is
// one commit per writer.
//
//	go test -run '^$' -bench BenchmarkPostgresCommit ./store/pgstore
func BenchmarkPostgresCommit(b *testing.B) {
	for _, writers := range []int{1, 8} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("writers=%d/batch=%d", writers, batch), func(b *testing.B) {
				s, err := pgstore.Open(b.Context(), pgtest.NewDSN(b))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				acts := make([][]bgtask.Action, writers)
				for w := range acts {
					acts[w] = make([]bgtask.Action, batch)
				}
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					var wg sync.WaitGroup
					for w := range writers {
						owner := fmt.Sprintf("owner-%d", w)
						for i := range batch {
							m := rec(fmt.Sprintf("task_%d_%d_%d", w, n, i), owner, bgtask.StatusRunning)
							acts[w][i] = bgtask.Upsert(m)
						}
						wg.Go(func() {
							if err := s.Commit(b.Context(), owner, acts[w]...); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
					n++
				}
				b.ReportMetric(float64(n*writers*batch)/b.Elapsed().Seconds(), "upserts/s")
			})
		}
	}
}
