package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job of river's side of the PostgreSQL rows.
type noopArgs struct{}

// Kind names the job kind.
func (noopArgs) Kind() string { return "bench_noop" }

// noopWorker works a noopArgs job by doing nothing.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

// Work returns at once.
func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func riverPGTasks(ctx context.Context, cfg config) ([]sample, error) {
	return pgTaskRows(ctx, cfg, func(dsn string, sh pgShape, lat *latencies[string]) (sample, error) {
		return riverPGShape(ctx, dsn, sh, lat)
	})
}

func riverPGShape(ctx context.Context, dsn string, sh pgShape, lat *latencies[string]) (s sample, err error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return sample{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return sample{}, fmt.Errorf("migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		// As river's benchmark (cmd/river/riverbench) tunes it for throughput.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1_000}},
		Workers:           workers,
	})
	if err != nil {
		return sample{}, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: sh.total() + 1, // never full: a full channel drops events
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	if err := client.Start(ctx); err != nil {
		return sample{}, err
	}
	defer func() {
		if serr := client.Stop(context.WithoutCancel(ctx)); err == nil && serr != nil {
			err = fmt.Errorf("stop: %w", serr)
		}
	}()
	s, err = timed(sh.total(), func() error {
		var wg sync.WaitGroup
		errs := make(chan error, sh.submitters+1)
		wg.Go(func() {
			for range sh.total() {
				select {
				case ev := <-events:
					if ev.Kind != river.EventKindJobCompleted {
						errs <- fmt.Errorf("job %d: event %s, want completed", ev.Job.ID, ev.Kind)
						return
					}
					lat.complete(fmt.Sprint(ev.Job.ID), time.Now())
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
		})
		for range sh.submitters {
			wg.Go(func() {
				for range sh.perSub {
					t0 := time.Now()
					res, err := client.Insert(ctx, noopArgs{}, nil)
					if err != nil {
						errs <- err
						return
					}
					lat.submit(fmt.Sprint(res.Job.ID), t0)
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	})
	return s, err
}
