package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/bgtask/bgtask"
)

func cancelGroup(sz sizes) *group {
	return &group{
		name: "cancel subtree",
		rows: []row{{name: fmt.Sprintf("cancel a %d-task subtree beside %s live tasks, until all ended, per subtree", sz.subtree, commas(float64(sz.live))), unit: perTask, ratios: true}},
		runs: [nCols]runFunc{
			colBgtask:   one(bgCancelTree),
			colRaw:      one(rawCancelTree),
			colErrgroup: one(errgroupCancelTree),
			colConc:     one(concCancelTree),
		},
		legend: "the live tasks park over 100 owners (bgtask) or in one group or pool (errgroup, conc); timed from the cancel until the last task of the subtree has ended: " +
			"bgtask: CancelTree of a root with its attached children, then their cancelled events drained from the owner's inbox; " +
			"raw: cancel of a root context the subtree's goroutines' contexts derive from, then a WaitGroup; errgroup and conc: cancel of the group's parent context, then Wait",
	}
}

// cancelRounds builds and cancels cfg.sz.cancels subtrees beside a
// background: build returns once a subtree is running and gives the timed
// cancel, and the meter counts only the cancels.
func cancelRounds(cfg config, build func() (cancel func() error, err error)) (sample, error) {
	var m meter
	for range cfg.sz.cancels {
		cancel, err := build()
		if err != nil {
			return sample{}, err
		}
		m.start()
		err = cancel()
		m.stop()
		if err != nil {
			return sample{}, err
		}
	}
	return m.per(cfg.sz.cancels), nil
}

func bgCancelTree(ctx context.Context, cfg config) (s sample, err error) {
	err = withManager(ctx, func(m *bgtask.Manager) error {
		for i := range cfg.sz.live {
			if _, err := m.Owner(fmt.Sprintf("other-%d", i%100)).Spawn(ctx, parkedTask); err != nil {
				return fmt.Errorf("spawn live task %d: %w", i, err)
			}
		}
		o := m.Owner(benchOwner)
		ib, err := o.Inbox()
		if err != nil {
			return err
		}
		var buf []bgtype.Event
		var started sync.WaitGroup
		fn := func(ctx context.Context, _ *bgtask.Task) (any, error) {
			started.Done()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s, err = cancelRounds(cfg, func() (func() error, error) {
			started.Add(cfg.sz.subtree)
			root, err := o.Spawn(ctx, fn)
			if err != nil {
				return nil, err
			}
			for range cfg.sz.subtree - 1 {
				if _, err := o.Spawn(ctx, fn, bgtask.WithParent(bgtype.Parent{TaskID: root})); err != nil {
					return nil, err
				}
			}
			started.Wait()
			return func() error {
				n, err := m.CancelTree(ctx, root)
				if err != nil || n != cfg.sz.subtree {
					return fmt.Errorf("CancelTree = %d, %v; want %d", n, err, cfg.sz.subtree)
				}
				buf, err = awaitKind(ctx, ib, bgtype.EventCanceled, cfg.sz.subtree, buf)
				return err
			}, nil
		})
		return err
	})
	return s, err
}

func rawCancelTree(ctx context.Context, cfg config) (sample, error) {
	bg, stopBG := context.WithCancel(ctx)
	var live sync.WaitGroup
	for range cfg.sz.live {
		tctx, cancel := context.WithCancel(bg)
		live.Go(func() {
			defer cancel()
			<-tctx.Done()
		})
	}
	defer func() { stopBG(); live.Wait() }()
	return cancelRounds(cfg, func() (func() error, error) {
		rootCtx, cancelRoot := context.WithCancel(ctx)
		var started, ended sync.WaitGroup
		started.Add(cfg.sz.subtree)
		for range cfg.sz.subtree {
			tctx, cancel := context.WithCancel(rootCtx)
			ended.Go(func() {
				defer cancel()
				started.Done()
				<-tctx.Done()
			})
		}
		started.Wait()
		return func() error { cancelRoot(); ended.Wait(); return nil }, nil
	})
}

func errgroupCancelTree(ctx context.Context, cfg config) (sample, error) {
	bg, stopBG := context.WithCancel(ctx)
	live, lctx := errgroup.WithContext(bg)
	for range cfg.sz.live {
		live.Go(func() error { <-lctx.Done(); return nil })
	}
	defer func() { stopBG(); _ = live.Wait() }()
	return cancelRounds(cfg, func() (func() error, error) {
		pctx, cancel := context.WithCancel(ctx)
		g, gctx := errgroup.WithContext(pctx)
		var started sync.WaitGroup
		started.Add(cfg.sz.subtree)
		for range cfg.sz.subtree {
			g.Go(func() error {
				started.Done()
				<-gctx.Done()
				return nil
			})
		}
		started.Wait()
		return func() error { cancel(); return g.Wait() }, nil
	})
}

func concCancelTree(ctx context.Context, cfg config) (sample, error) {
	bg, stopBG := context.WithCancel(ctx)
	live := pool.New().WithContext(bg)
	for range cfg.sz.live {
		live.Go(func(ctx context.Context) error { <-ctx.Done(); return nil })
	}
	defer func() { stopBG(); _ = live.Wait() }()
	return cancelRounds(cfg, func() (func() error, error) {
		pctx, cancel := context.WithCancel(ctx)
		p := pool.New().WithContext(pctx)
		var started sync.WaitGroup
		started.Add(cfg.sz.subtree)
		for range cfg.sz.subtree {
			p.Go(func(ctx context.Context) error {
				started.Done()
				<-ctx.Done()
				return nil
			})
		}
		started.Wait()
		return func() error { cancel(); return p.Wait() }, nil
	})
}
