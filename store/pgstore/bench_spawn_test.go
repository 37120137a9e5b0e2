package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// BenchmarkPostgresSpawnComplete is a task's life on a started Store, as
// its owner sees it: Spawn, the task returns, Wait returns the completed
// record (two commits: running, completed). spawners owners do it at once,
// one iteration is one task each. It is the pgstore side of the root's
// BenchmarkSpawnComplete: the end notification (NOTIFY in the commit that
// makes a record terminal) must not slow it.
//
//	go test -run '^$' -bench BenchmarkPostgresSpawnComplete -count 5 ./store/pgstore
func BenchmarkPostgresSpawnComplete(b *testing.B) {
	for _, spawners := range []int{1, 8} {
		b.Run(fmt.Sprintf("spawners=%d", spawners), func(b *testing.B) {
			s, err := pgstore.Open(b.Context(), pgtest.NewDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance("inst_bench"))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start(b.Context(), m.Runtime()); err != nil {
				b.Fatal(err)
			}
			defer m.Shutdown(context.Background())
			fn := func(context.Context, *bgtask.Task) (any, error) { return 42, nil }
			b.ReportAllocs()
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range spawners {
					o := m.Owner(fmt.Sprintf("owner-%d", w))
					wg.Go(func() {
						id, err := o.Spawn(b.Context(), fn)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := o.Wait(b.Context(), id); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
