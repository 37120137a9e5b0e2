package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// benchInstance is a started instance for a benchmark, with kinds.
func benchInstance(b *testing.B, dsn, id string, kinds ...bgtask.Runner) (*pgstore.Store, *bgtask.Manager) {
	b.Helper()
	s, err := pgstore.Open(b.Context(), dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(id), bgtask.WithKinds(kinds...))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(b.Context(), m.Runtime()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		m.Shutdown(context.Background())
		s.Close()
	})
	return s, m
}

// queueWaiting commits n records of kind that wait in the queue, as a
// reaper leaves the tasks of a dead instance (attempt 2, no instance).
func queueWaiting(b *testing.B, s *pgstore.Store, kind string, n int) {
	b.Helper()
	now := time.Now()
	acts := make([]store.Action, n)
	for i := range acts {
		acts[i] = store.UpsertAction(bgtype.TaskMeta{ID: idgen.NewTask(now), Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusQueued,
			CreatedAt: now, Attempt: 2, Resume: &bgtype.Resume{Kind: kind, Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: now}})
	}
	if err := s.Commit(b.Context(), "alice", acts...); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimRequeued is the claim of re-queued tasks: one iteration
// is 100 waiting records claimed (ClaimWaiting on every instance at once,
// again until all are) and their attempts started; claims/s is the rate.
// The kind's function returns at once. With MaxRunning set (cap=8), every
// claim also counts the kind's running records under its advisory lock.
// A pass claims in one transaction (store.KindClaimer) and starts the
// attempts side by side; before, each instance claimed every record in
// turn and 4 instances were slower than 1 (decision 723 has the figures).
//
//	go test -run '^$' -bench BenchmarkClaimRequeued -benchtime 10x -count 5 ./store/pgstore
func BenchmarkClaimRequeued(b *testing.B) {
	const batch = 100
	for _, tc := range []struct {
		instances, cap int
	}{{1, 0}, {4, 0}, {1, 8}, {4, 8}} {
		b.Run(fmt.Sprintf("instances=%d/cap=%d", tc.instances, tc.cap), func(b *testing.B) {
			dsn := pgtest.NewDSN(b)
			var ran atomic.Int64
			var all sync.WaitGroup
			k, err := bgtask.NewKind("bench/v1", func(context.Context, *bgtask.Task, stepsSpec, *bgtask.Checkpoint[stepsCursor]) (any, error) {
				ran.Add(1)
				all.Done()
				return nil, nil
			}, bgtask.KindConfig{MaxRunning: tc.cap})
			if err != nil {
				b.Fatal(err)
			}
			var fleet []*bgtask.Manager
			var s0 *pgstore.Store
			for i := range tc.instances {
				s, m := benchInstance(b, dsn, fmt.Sprintf("inst_%d", i), k)
				fleet = append(fleet, m)
				if s0 == nil {
					s0 = s
				}
			}
			b.ReportAllocs()
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				all.Add(batch)
				queueWaiting(b, s0, "bench/v1", batch)
				b.StartTimer()
				t0 := time.Now()
				var wg sync.WaitGroup
				for _, m := range fleet {
					wg.Go(func() {
						for {
							n, err := m.ClaimWaiting(b.Context())
							if err != nil {
								b.Error(err)
								return
							}
							if n == 0 && (tc.cap == 0 || ran.Load()%batch == 0) {
								return
							}
						}
					})
				}
				wg.Wait()
				all.Wait()
				elapsed += time.Since(t0)
			}
			b.ReportMetric(float64(ran.Load())/elapsed.Seconds(), "claims/s")
		})
	}
}

// BenchmarkKillToResume is the time from an instance declared dead (the
// reaper's pass, driven here) to the new attempt of its resumable task
// running on another instance: the reap (requeue), a claim and the start.
// In a fleet the reaper runs every grace/2 and an instance claims every
// second, so those bound the wait before this work starts.
//
//	go test -run '^$' -bench BenchmarkKillToResume -count 5 ./store/pgstore
func BenchmarkKillToResume(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	running := make(chan int64, 1)
	k, err := bgtask.NewKind("bench/v1", func(ctx context.Context, tk *bgtask.Task, _ stepsSpec, _ *bgtask.Checkpoint[stepsCursor]) (any, error) {
		running <- int64(tk.Attempt())
		if tk.Attempt() == 1 {
			<-ctx.Done() // the dying instance's attempt
		}
		return nil, nil
	}, bgtask.KindConfig{})
	if err != nil {
		b.Fatal(err)
	}
	sb, mb := benchInstance(b, dsn, "inst_b", k)
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		sa, err := pgstore.Open(ctx, dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		ma, err := bgtask.New(bgtask.WithStore(sa), bgtask.WithInstance(fmt.Sprintf("inst_a%d", i)), bgtask.WithKinds(k))
		if err != nil {
			b.Fatal(err)
		}
		if err := sa.Start(ctx, ma.Runtime()); err != nil {
			b.Fatal(err)
		}
		if _, err := k.Spawn(ctx, ma.Owner("alice"), stepsSpec{}); err != nil {
			b.Fatal(err)
		}
		if got := <-running; got != 1 {
			b.Fatalf("attempt %d, want 1", got)
		}
		sqlExec(b, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = $1`, ma.Instance())
		b.StartTimer()
		if n, err := sb.Reap(ctx); err != nil || n != 1 {
			b.Fatalf("Reap = %d, %v", n, err)
		}
		if _, err := mb.ClaimWaiting(ctx); err != nil { // or its claim loop came first
			b.Fatal(err)
		}
		if got := <-running; got != 2 {
			b.Fatalf("attempt %d, want 2", got)
		}
		b.StopTimer()
		ma.Shutdown(ctx)
		sa.Close()
		b.StartTimer()
	}
}
