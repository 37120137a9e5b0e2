package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/bgtask/bgtask"
)

func millionGroup(sz sizes) *group {
	return &group{
		name: "many owners",
		rows: []row{
			{name: fmt.Sprintf("%s tasks over %s owners, per task", commas(float64(sz.million)), commas(float64(sz.owners))), unit: perTask, ratios: true},
			{name: fmt.Sprintf("%s tasks over %s owners, heap after GC at the end", commas(float64(sz.million)), commas(float64(sz.owners))), unit: megabyte},
		},
		runs: [nCols]runFunc{
			colBgtask:   bgMillion,
			colRaw:      rawMillion,
			colErrgroup: errgroupMillion,
			colConc:     concMillion,
		},
		legend: "in batches of 10 tasks per owner, each batch awaited per owner (bgtask: its completed events drained from the owner's inbox; " +
			"raw: results on a channel per owner; errgroup, conc: a group or pool per owner and batch); " +
			"the heap is measured after GC every " + commas(float64(sz.checkpoint)) + " tasks, outside the timed part",
	}
}

// manyOwners runs cfg.sz.million tasks over cfg.sz.owners owners in
// batches of 10 per owner: spawn(o, n) starts n tasks of owner o and
// await(o, n) waits for them. It returns the time per task and the heap
// after GC at every checkpoint, as the rows of the many-owners group.
func manyOwners(cfg config, spawn, await func(o, n int) error) ([]sample, error) {
	const perOwner = 10
	owners := cfg.sz.owners
	before := heapBytes()
	var m meter
	var heaps []string
	var last float64
	next := cfg.sz.checkpoint
	for done := 0; done < cfg.sz.million; {
		n := min(perOwner, (cfg.sz.million-done)/owners)
		if n == 0 {
			break
		}
		m.start()
		for o := range owners {
			if err := spawn(o, n); err != nil {
				return nil, err
			}
		}
		for o := range owners {
			if err := await(o, n); err != nil {
				return nil, err
			}
		}
		m.stop()
		done += n * owners
		if done >= next || done+owners > cfg.sz.million {
			last = float64(int64(heapBytes())-int64(before)) / (1 << 20)
			heaps = append(heaps, fmt.Sprintf("%.1f", last))
			next += cfg.sz.checkpoint
		}
	}
	per := m.per(cfg.sz.million)
	return []sample{per, {v: last, note: "heap MB after GC every " + commas(float64(cfg.sz.checkpoint)) + " tasks: " + strings.Join(heaps, " ")}}, nil
}

func bgMillion(ctx context.Context, cfg config) (ss []sample, err error) {
	err = withManager(ctx, func(m *bgtask.Manager) error {
		views := make([]bgtask.Owner, cfg.sz.owners)
		inboxes := make([]*bgtask.Inbox, cfg.sz.owners)
		for i := range views {
			views[i] = m.Owner(fmt.Sprint("owner-", i))
			ib, err := views[i].Inbox()
			if err != nil {
				return err
			}
			inboxes[i] = ib
		}
		var buf []bgtype.Event
		ss, err = manyOwners(cfg, func(o, n int) error {
			for range n {
				if _, err := views[o].Spawn(ctx, answer); err != nil {
					return err
				}
			}
			return nil
		}, func(o, n int) (err error) {
			buf, err = awaitKind(ctx, inboxes[o], bgtype.EventCompleted, n, buf)
			return err
		})
		return err
	})
	return ss, err
}

func rawMillion(ctx context.Context, cfg config) ([]sample, error) {
	res := make([]chan any, cfg.sz.owners)
	for i := range res {
		res[i] = make(chan any, 10)
	}
	return manyOwners(cfg, func(o, n int) error {
		for range n {
			tctx, cancel := context.WithCancel(ctx)
			go func() {
				defer cancel()
				if tctx.Err() != nil {
					res[o] <- nil
					return
				}
				res[o] <- 42
			}()
		}
		return nil
	}, func(o, n int) error {
		for range n {
			if v := <-res[o]; v != 42 {
				return fmt.Errorf("got %v, want 42", v)
			}
		}
		return nil
	})
}

func errgroupMillion(ctx context.Context, cfg config) ([]sample, error) {
	groups := make([]*errgroup.Group, cfg.sz.owners)
	return manyOwners(cfg, func(o, n int) error {
		g, gctx := errgroup.WithContext(ctx)
		groups[o] = g
		for range n {
			g.Go(func() error { return gctx.Err() })
		}
		return nil
	}, func(o, _ int) error {
		err := groups[o].Wait()
		groups[o] = nil
		return err
	})
}

func concMillion(ctx context.Context, cfg config) ([]sample, error) {
	pools := make([]*pool.ResultContextPool[int], cfg.sz.owners)
	return manyOwners(cfg, func(o, n int) error {
		p := pool.NewWithResults[int]().WithContext(ctx)
		pools[o] = p
		for range n {
			p.Go(func(context.Context) (int, error) { return 42, nil })
		}
		return nil
	}, func(o, n int) error {
		vs, err := pools[o].Wait()
		pools[o] = nil
		if err == nil && len(vs) != n {
			err = fmt.Errorf("%d results, want %d", len(vs), n)
		}
		return err
	})
}
