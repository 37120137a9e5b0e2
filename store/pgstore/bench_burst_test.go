package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// BenchmarkPostgresBurstCommits is the commit count of spawns and ends on a
// started Store: submitters goroutines spawn perSub no-op tasks each, back
// to back (a burst: many goroutines, one task each, over 100 owners), and
// every completed event is awaited. Besides the time it reports, per task,
// the Commits the Manager made (commits/task: a spawn and an end each) and
// the transactions they took (txns/task: a group of queued Commits is one),
// which is what a commit-limited server (fsync on) pays for, and the
// Commits that joined a group's open transaction late (late/task) and the
// transactions that locked their counts first (prelocks/task). pgtest's
// server runs with fsync off; for the commit limit point BGTASK_PG_DSN at a
// server with default settings:
//
//	BGTASK_PG_DSN=postgres://... go test -run '^$' -bench BenchmarkPostgresBurstCommits -benchtime 1x -count 3 ./store/pgstore
func BenchmarkPostgresBurstCommits(b *testing.B) {
	for _, sh := range []struct {
		name                    string
		submitters, perSub, own int
	}{
		{"submitters=1", 1, 1000, 1},
		{"submitters=8", 8, 125, 8},
		{"burst=2000", 2000, 1, 100},
	} {
		b.Run(sh.name, func(b *testing.B) {
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
			inboxes := make([]*bgtask.Inbox, sh.own)
			for i := range inboxes {
				if inboxes[i], err = m.Owner(fmt.Sprintf("owner-%d", i)).Inbox(); err != nil {
					b.Fatal(err)
				}
			}
			fn := func(context.Context, *bgtask.Task) (any, error) { return nil, nil }
			tasks := sh.submitters * sh.perSub
			g0, c0 := pgstore.Groups(s)
			l0 := pgstore.LateCommits(s)
			p0 := pgstore.Prelocks(s)
			for b.Loop() {
				var wg sync.WaitGroup
				for i, ib := range inboxes {
					wg.Go(func() {
						for got := 0; got < tasks/sh.own; {
							if err := ib.Wait(b.Context()); err != nil {
								b.Errorf("owner-%d: %v", i, err)
								return
							}
							for _, ev := range ib.Drain() {
								if ev.Kind == bgtype.EventCompleted {
									got++
								}
							}
						}
					})
				}
				for i := range sh.submitters {
					o := m.Owner(fmt.Sprintf("owner-%d", i%sh.own))
					wg.Go(func() {
						for range sh.perSub {
							if _, err := o.Spawn(b.Context(), fn); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			groups, grouped := pgstore.Groups(s)
			groups, grouped = groups-g0, grouped-c0
			n := float64(b.N * tasks)
			commits := 2 * n // a spawn and an end each
			b.ReportMetric(commits/n, "commits/task")
			b.ReportMetric((commits-float64(grouped)+float64(groups))/n, "txns/task")
			b.ReportMetric(b.Elapsed().Seconds()*1e9/n, "ns/task")
			b.ReportMetric(float64(pgstore.LateCommits(s)-l0)/n, "late/task")
			b.ReportMetric(float64(pgstore.Prelocks(s)-p0)/n, "prelocks/task") // decision 797
		})
	}
}
