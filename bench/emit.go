package main

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

func emitGroup(sizes) *group {
	return &group{
		name: "emit/drain",
		rows: []row{{name: "event emitted by a task, drained by its owner, per event", unit: perTask, ratios: true}},
		runs: [nCols]runFunc{
			colBgtask: one(bgEmitDrain),
			colRaw:    one(rawEmitDrain),
		},
		legend: "bgtask: a task under WakeOnActivity calls Emit with an int payload in a loop while its owner waits on and drains the inbox; " +
			"raw: a goroutine sends the ints on a channel of any (buffer 64) to another; errgroup and conc have no event stream",
	}
}

func bgEmitDrain(ctx context.Context, cfg config) (s sample, err error) {
	n := cfg.sz.emits
	err = withManager(ctx, func(m *bgtask.Manager) error {
		o := m.Owner(benchOwner)
		ib, err := o.Inbox()
		if err != nil {
			return err
		}
		start := make(chan struct{})
		emitted := make(chan error, 1)
		// A failed Emit ends the drain's wait instead of leaving it
		// waiting for events that never come.
		dctx, failed := context.WithCancel(ctx)
		defer failed()
		if _, err := o.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
			<-start
			var err error
			for i := range n {
				if err = t.Emit("progress", i); err != nil {
					failed()
					break
				}
			}
			emitted <- err
			<-ctx.Done()
			return nil, ctx.Err()
		}, bgtask.WithWake(bgtype.WakeOnActivity)); err != nil {
			return err
		}
		buf := make([]bgtype.Event, 0, 1024)
		s, err = timed(n, func() error {
			close(start)
			_, err := awaitKind(dctx, ib, bgtype.EventCustom, n, buf)
			return err
		})
		if eerr := <-emitted; eerr != nil {
			err = fmt.Errorf("Emit: %w", eerr)
		}
		return err
	})
	return s, err
}

func rawEmitDrain(ctx context.Context, cfg config) (sample, error) {
	n := cfg.sz.emits
	return timed(n, func() error {
		ch := make(chan any, 64)
		go func() {
			for i := range n {
				ch <- i
			}
		}()
		for i := range n {
			if v := <-ch; v != i {
				return fmt.Errorf("got %v, want %d", v, i)
			}
		}
		return nil
	})
}
