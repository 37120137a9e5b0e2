package main

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/bgtask/bgtask"
)

func spawnGroup(sizes) *group {
	return &group{
		name: "spawn+complete",
		rows: []row{{name: "spawn + completion seen, one task at a time", unit: perTask, ratios: true}},
		runs: [nCols]runFunc{
			colBgtask:   one(bgSpawnComplete),
			colRaw:      one(rawSpawnComplete),
			colErrgroup: one(errgroupSpawnComplete),
			colConc:     one(concSpawnComplete),
			colEino:     one(einoSpawnComplete),
		},
		legend: "bgtask: Owner.Spawn, then the completed event drained from the owner's inbox; " +
			"raw: go with its own context.WithCancel, the result on a channel; " +
			"errgroup: errgroup.WithContext, Go, Wait; conc: pool.NewWithResults().WithContext, Go, Wait; " +
			"eino: backgroundtask.Manager.Run in the background, then Manager.Wait for its id",
	}
}

func burstGroup(sz sizes) *group {
	return &group{
		name: "burst",
		rows: []row{{name: fmt.Sprintf("burst of %s spawned, then all awaited, per task", commas(float64(sz.burst))), unit: perTask, ratios: true}},
		runs: [nCols]runFunc{
			colBgtask:   one(bgBurst),
			colRaw:      one(rawBurst),
			colErrgroup: one(errgroupBurst),
			colConc:     one(concBurst),
			colEino:     one(einoBurst),
		},
		legend: "bgtask: one owner spawns them all, then every completed event is drained from its inbox; " +
			"raw: a goroutine and a context.WithCancel each, results on one channel; errgroup: one group, Wait; conc: one result pool, Wait; " +
			"eino: one backgroundtask.Manager runs them all in the background, then Manager.Wait for each id",
	}
}

// one adapts a single-row measurement to a runFunc.
func one(f func(ctx context.Context, cfg config) (sample, error)) runFunc {
	return func(ctx context.Context, cfg config) ([]sample, error) {
		s, err := f(ctx, cfg)
		return []sample{s}, err
	}
}

func bgSpawnComplete(ctx context.Context, cfg config) (s sample, err error) {
	err = withManager(ctx, func(m *bgtask.Manager) error {
		o := m.Owner(benchOwner)
		ib, err := o.Inbox()
		if err != nil {
			return err
		}
		buf := make([]bgtype.Event, 0, 16)
		s, err = timed(cfg.sz.spawns, func() error {
			for range cfg.sz.spawns {
				id, err := o.Spawn(ctx, answer)
				if err != nil {
					return err
				}
				for done := false; !done; {
					if err := ib.Wait(ctx); err != nil {
						return err
					}
					buf = ib.AppendDrain(buf[:0])
					for i := range buf {
						if buf[i].TaskID != id {
							continue
						}
						if buf[i].Kind != bgtype.EventCompleted || string(buf[i].Result) != "42" {
							return fmt.Errorf("event %+v, want completed with result 42", buf[i])
						}
						done = true
					}
				}
			}
			return nil
		})
		return err
	})
	return s, err
}

func rawSpawnComplete(ctx context.Context, cfg config) (sample, error) {
	return timed(cfg.sz.spawns, func() error {
		for range cfg.sz.spawns {
			tctx, cancel := context.WithCancel(ctx)
			res := make(chan any, 1)
			go func() {
				if tctx.Err() != nil {
					res <- nil
					return
				}
				res <- 42
			}()
			v := <-res
			cancel()
			if v != 42 {
				return fmt.Errorf("got %v, want 42", v)
			}
		}
		return nil
	})
}

func errgroupSpawnComplete(ctx context.Context, cfg config) (sample, error) {
	return timed(cfg.sz.spawns, func() error {
		for range cfg.sz.spawns {
			g, gctx := errgroup.WithContext(ctx)
			var v int
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				v = 42
				return nil
			})
			if err := g.Wait(); err != nil || v != 42 {
				return fmt.Errorf("got %d, %v; want 42", v, err)
			}
		}
		return nil
	})
}

func concSpawnComplete(ctx context.Context, cfg config) (sample, error) {
	return timed(cfg.sz.spawns, func() error {
		for range cfg.sz.spawns {
			p := pool.NewWithResults[int]().WithContext(ctx)
			p.Go(func(context.Context) (int, error) { return 42, nil })
			vs, err := p.Wait()
			if err != nil || len(vs) != 1 || vs[0] != 42 {
				return fmt.Errorf("got %v, %v; want [42]", vs, err)
			}
		}
		return nil
	})
}

func bgBurst(ctx context.Context, cfg config) (s sample, err error) {
	n := cfg.sz.burst
	err = withManager(ctx, func(m *bgtask.Manager) error {
		o := m.Owner(benchOwner)
		ib, err := o.Inbox()
		if err != nil {
			return err
		}
		buf := make([]bgtype.Event, 0, 1024)
		s, err = timed(n, func() error {
			for range n {
				if _, err := o.Spawn(ctx, answer); err != nil {
					return err
				}
			}
			_, err := awaitKind(ctx, ib, bgtype.EventCompleted, n, buf)
			return err
		})
		return err
	})
	return s, err
}

func rawBurst(ctx context.Context, cfg config) (sample, error) {
	n := cfg.sz.burst
	return timed(n, func() error {
		res := make(chan any, n)
		cancels := make([]context.CancelFunc, n)
		for i := range n {
			tctx, cancel := context.WithCancel(ctx)
			cancels[i] = cancel
			go func() {
				if tctx.Err() != nil {
					res <- nil
					return
				}
				res <- 42
			}()
		}
		for range n {
			if v := <-res; v != 42 {
				return fmt.Errorf("got %v, want 42", v)
			}
		}
		for _, c := range cancels {
			c()
		}
		return nil
	})
}

func errgroupBurst(ctx context.Context, cfg config) (sample, error) {
	n := cfg.sz.burst
	return timed(n, func() error {
		g, gctx := errgroup.WithContext(ctx)
		res := make([]int, n)
		for i := range n {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				res[i] = 42
				return nil
			})
		}
		return g.Wait()
	})
}

func concBurst(ctx context.Context, cfg config) (sample, error) {
	n := cfg.sz.burst
	return timed(n, func() error {
		p := pool.NewWithResults[int]().WithContext(ctx)
		for range n {
			p.Go(func(context.Context) (int, error) { return 42, nil })
		}
		vs, err := p.Wait()
		if err == nil && len(vs) != n {
			err = fmt.Errorf("%d results, want %d", len(vs), n)
		}
		return err
	})
}
