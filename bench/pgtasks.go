package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
)

// pgTasksGroup is the task queue on PostgreSQL against river: a task (a
// job) submitted, run as a no-op, and its completion committed and seen.
func pgTasksGroup(sz sizes) *group {
	return &group{
		name: "PostgreSQL tasks",
		rows: []row{
			{name: fmt.Sprintf("PostgreSQL tasks, 1 submitter, %s tasks, per task", commas(float64(sz.pgTasks))), unit: perTask, ratios: true},
			{name: fmt.Sprintf("PostgreSQL tasks, %d submitters, %s tasks, per task", sz.writers, commas(float64(sz.pgTasks))), unit: perTask, ratios: true},
			{name: fmt.Sprintf("PostgreSQL tasks, burst of %s, per task", commas(float64(sz.burst))), unit: perTask, ratios: true},
			{name: "PostgreSQL tasks, 1 submitter, submit to completed, p50", unit: latency, ratios: true},
		},
		runs: [nCols]runFunc{colBgtask: bgPGTasks, colRaw: rawPGTasks, colRiver: riverPGTasks},
		skip: func(cfg config) string {
			if cfg.dsn == "" {
				return "no DSN"
			}
			return ""
		},
		legend: "a new schema each time in the database of -dsn (or $" + envDSN + "), dropped afterwards; each submitter submits its share back to back " +
			"while the completions are collected; a burst is " + fmt.Sprint(sz.burst) + " goroutines submitting one task each at once; " +
			"the time runs from the first submission to the last completion seen, which is committed (durable) when seen; the p50 is of each task's " +
			"submission to its completion seen, in the 1-submitter run. " +
			"bgtask: pgstore.Open, Store.Start, Owner.Spawn of a function returning nil (one owner per submitter, " + fmt.Sprint(pgBurstOwners) + " in the burst), completed events drained from the owners' inboxes; " +
			"raw (the floor of the same promises): on a pgxpool of the default size, as pgstore's and river's, each submitter INSERTs a task's row in its own autocommit transaction " +
			"and hands its id to one completer, which marks what is queued completed in one UPDATE ... WHERE id = ANY($1) (as river's batched completer) and sees those tasks completed once it committed; " +
			"river (v0.51.2, riverpgxv5 on a pgxpool): rivermigrate up, Client.Insert of a no-op job, completions from Client.SubscribeConfig, " +
			"tuned as river's own benchmark (riverbench) tunes it: FetchCooldown 2ms, FetchPollInterval 20ms, MaxWorkers 1,000 on the default queue",
	}
}

// pgBurstOwners is how many owners the burst's tasks spread over.
const pgBurstOwners = 100

// pgShape is one run of a row: submitters goroutines submitting perSub
// tasks each, back to back.
type pgShape struct{ submitters, perSub int }

func (s pgShape) total() int { return s.submitters * s.perSub }

// pgShapes are the shapes of the rows, in order; the p50 row comes from
// the first.
func pgShapes(cfg config) []pgShape {
	return []pgShape{
		{1, cfg.sz.pgTasks},
		{cfg.sz.writers, cfg.sz.pgTasks / cfg.sz.writers},
		{cfg.sz.burst, 1},
	}
}

// latencies records each task's submission and completion times by id.
type latencies[K comparable] struct {
	mu        sync.Mutex
	submitted map[K]time.Time
	completed map[K]time.Time
}

func newLatencies[K comparable](n int) *latencies[K] {
	return &latencies[K]{submitted: make(map[K]time.Time, n), completed: make(map[K]time.Time, n)}
}

func (l *latencies[K]) submit(id K, t time.Time) {
	l.mu.Lock()
	l.submitted[id] = t
	l.mu.Unlock()
}

func (l *latencies[K]) complete(id K, t time.Time) {
	l.mu.Lock()
	l.completed[id] = t
	l.mu.Unlock()
}

// p50 returns the median of completion minus submission, in nanoseconds;
// it fails unless every submitted task completed once.
func (l *latencies[K]) p50() (float64, error) {
	if len(l.completed) != len(l.submitted) {
		return 0, fmt.Errorf("%d completions for %d submissions", len(l.completed), len(l.submitted))
	}
	ds := make([]time.Duration, 0, len(l.submitted))
	for id, t0 := range l.submitted {
		t1, ok := l.completed[id]
		if !ok {
			return 0, fmt.Errorf("task %v submitted, never completed", id)
		}
		ds = append(ds, t1.Sub(t0))
	}
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0, nil
	}
	return float64(ds[len(ds)/2].Nanoseconds()), nil
}

// pgTaskRows runs one sample per shape, each in a schema of its own, with
// run, and returns the rows' samples: one per shape, then the p50 of the
// first.
func pgTaskRows(ctx context.Context, cfg config, run func(dsn string, sh pgShape, lat *latencies[string]) (sample, error)) ([]sample, error) {
	var ss []sample
	var p50 float64
	for i, sh := range pgShapes(cfg) {
		lat := newLatencies[string](sh.total())
		s, err := inSchema(ctx, cfg, func(dsn string) (sample, error) { return run(dsn, sh, lat) })
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if p50, err = lat.p50(); err != nil {
				return nil, err
			}
		}
		ss = append(ss, s)
	}
	return append(ss, sample{v: p50}), nil
}

func bgPGTasks(ctx context.Context, cfg config) ([]sample, error) {
	return pgTaskRows(ctx, cfg, func(dsn string, sh pgShape, lat *latencies[string]) (sample, error) {
		return bgPGShape(ctx, dsn, sh, lat)
	})
}

// noop is the task of the PostgreSQL rows: it returns at once, no result.
func noop(context.Context, *bgtask.Task) (any, error) { return nil, nil }

func bgPGShape(ctx context.Context, dsn string, sh pgShape, lat *latencies[string]) (s sample, err error) {
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return sample{}, err
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	err = withManager(ctx, func(m *bgtask.Manager) error {
		if err := st.Start(ctx, m.Runtime()); err != nil {
			return err
		}
		owners := min(sh.submitters, pgBurstOwners)
		inboxes := make([]*bgtask.Inbox, owners)
		for i := range inboxes {
			ib, err := m.Owner(fmt.Sprintf("owner-%d", i)).Inbox()
			if err != nil {
				return err
			}
			inboxes[i] = ib
		}
		s, err = timed(sh.total(), func() error {
			var wg sync.WaitGroup
			errs := make(chan error, sh.submitters+owners)
			for i, ib := range inboxes {
				want := sh.total() / owners
				wg.Go(func() {
					if err := collectCompleted(ctx, ib, want, lat); err != nil {
						errs <- fmt.Errorf("owner-%d: %w", i, err)
					}
				})
			}
			for i := range sh.submitters {
				o := m.Owner(fmt.Sprintf("owner-%d", i%owners))
				wg.Go(func() {
					for range sh.perSub {
						t0 := time.Now()
						id, err := o.Spawn(ctx, noop)
						if err != nil {
							errs <- err
							return
						}
						lat.submit(id, t0)
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		})
		return err
	}, bgtask.WithStore(st), bgtask.WithInstance("bench"))
	return s, err
}

// collectCompleted drains ib until want completed events have come,
// recording when each was seen.
func collectCompleted(ctx context.Context, ib *bgtask.Inbox, want int, lat *latencies[string]) error {
	buf := make([]bgtype.Event, 0, 64)
	for got := 0; got < want; {
		if err := ib.Wait(ctx); err != nil {
			return err
		}
		buf = ib.AppendDrain(buf[:0])
		now := time.Now()
		for i := range buf {
			switch buf[i].Kind {
			case bgtype.EventCompleted:
				lat.complete(buf[i].TaskID, now)
				got++
			case bgtype.EventFailed, bgtype.EventCanceled:
				return fmt.Errorf("event %+v, want completed", buf[i])
			}
		}
	}
	return nil
}
