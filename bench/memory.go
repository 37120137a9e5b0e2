package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"

	"github.com/bgtask/bgtask"
)

func parkedGroup(sz sizes) *group {
	return &group{
		name: "parked memory",
		rows: []row{{name: "memory per parked task (heap + stack after GC)", unit: bytesPer, ratios: true}},
		runs: [nCols]runFunc{
			colBgtask:   one(bgParked),
			colRaw:      one(rawParked),
			colErrgroup: one(errgroupParked),
			colConc:     one(concParked),
			colEino:     one(einoParked),
		},
		legend: commas(float64(sz.parked)) + " tasks blocked on their context: bgtask tasks of one owner (task, context, goroutine, stored record); " +
			"raw: goroutines with a context.WithCancel each; errgroup: one group's goroutines; conc: one context pool's goroutines; " +
			"eino: background tasks of one backgroundtask.Manager (record, context, goroutine)",
	}
}

func retainedGroup(sz sizes) *group {
	return &group{
		name: "retained memory",
		rows: []row{{name: fmt.Sprintf("heap per finished record kept by retention (%d owners)", sz.retainOwners), unit: bytesPer}},
		runs: [nCols]runFunc{colBgtask: one(bgRetained)},
		legend: "bgtask: " + commas(float64(sz.retainTasks)) + " tasks per owner over " + commas(float64(sz.retainOwners)) + " owners complete and their events are drained, with the default retention " +
			"(1,000 records per owner); the heap after GC is divided by the records the store still holds. " +
			"The peers keep nothing once a goroutine has returned",
	}
}

// warmGoroutines starts and ends k goroutines, so that the runtime's
// goroutine descriptors are already allocated (and reused) when memory is
// measured: every contender then counts the same things.
func warmGoroutines(k int) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range k {
		wg.Go(func() { <-stop })
	}
	close(stop)
	wg.Wait()
}

// parkedBytes measures the live bytes per task that start adds: start must
// return once all k tasks are running, and leave a function that ends them.
//
// A stop may return before the goroutines it ended have exited (eino's
// Close does; a task's goroutine still runs the library's code after the
// function returned): parkedBytes then waits until they have, so that they
// do not exit during the next sample and lower its figure. It also waits,
// first, for those of an earlier group (a burst's): alive at the first
// collection, deep in their ends, they would make the runtime start the
// sample's goroutines with larger stacks (GODEBUG=adaptivestackstart).
func parkedBytes(k int, start func() (stop func() error, err error)) (sample, error) {
	awaitGoroutines(idleGoroutines + leftoverGoroutines) // an earlier group's (a burst's) ending goroutines
	warmGoroutines(k)
	base := runtime.NumGoroutine()
	before := liveBytes()
	stop, err := start()
	if err != nil {
		return sample{}, err
	}
	after := liveBytes()
	err = stop()
	awaitGoroutines(base + leftoverGoroutines)
	if err != nil {
		return sample{}, err
	}
	return sample{v: float64(int64(after)-int64(before)) / float64(k)}, nil
}

// idleGoroutines is how many goroutines run when the program starts.
var idleGoroutines = runtime.NumGoroutine()

// leftoverGoroutines is how many goroutines a contender may keep after its
// stop: bgtask's idle workers (at most GOMAXPROCS x 4) wait a second or two
// for a next task.
var leftoverGoroutines = 4*runtime.GOMAXPROCS(0) + 8

// awaitGoroutines waits until at most n goroutines run, for up to ten
// seconds (a leak is the contender's and shows in its next sample).
func awaitGoroutines(n int) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "bench: %d goroutines still run after 10s, want at most %d\n", runtime.NumGoroutine(), n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func bgParked(ctx context.Context, cfg config) (s sample, err error) {
	k := cfg.sz.parked
	m, err := bgtask.New()
	if err != nil {
		return sample{}, err
	}
	s, err = parkedBytes(k, func() (func() error, error) {
		o := m.Owner(benchOwner)
		var started sync.WaitGroup
		started.Add(k)
		fn := func(ctx context.Context, _ *bgtask.Task) (any, error) {
			started.Done()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		for i := range k {
			if _, err := o.Spawn(ctx, fn); err != nil {
				started.Add(i - k)
				started.Wait()
				return nil, err
			}
		}
		started.Wait()
		return func() error { return m.Shutdown(context.WithoutCancel(ctx)) }, nil
	})
	if err != nil {
		_ = m.Shutdown(context.WithoutCancel(ctx))
	}
	return s, err
}

func rawParked(ctx context.Context, cfg config) (sample, error) {
	k := cfg.sz.parked
	return parkedBytes(k, func() (func() error, error) {
		var started, ended sync.WaitGroup
		started.Add(k)
		cancels := make([]context.CancelFunc, k)
		for i := range k {
			tctx, cancel := context.WithCancel(ctx)
			cancels[i] = cancel
			ended.Go(func() {
				started.Done()
				<-tctx.Done()
			})
		}
		started.Wait()
		return func() error {
			for _, c := range cancels {
				c()
			}
			ended.Wait()
			return nil
		}, nil
	})
}

func errgroupParked(ctx context.Context, cfg config) (sample, error) {
	k := cfg.sz.parked
	return parkedBytes(k, func() (func() error, error) {
		pctx, cancel := context.WithCancel(ctx)
		g, gctx := errgroup.WithContext(pctx)
		var started sync.WaitGroup
		started.Add(k)
		for range k {
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

func concParked(ctx context.Context, cfg config) (sample, error) {
	k := cfg.sz.parked
	return parkedBytes(k, func() (func() error, error) {
		pctx, cancel := context.WithCancel(ctx)
		p := pool.New().WithContext(pctx)
		var started sync.WaitGroup
		started.Add(k)
		for range k {
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

func bgRetained(ctx context.Context, cfg config) (s sample, err error) {
	owners, perOwner := cfg.sz.retainOwners, cfg.sz.retainTasks
	before := heapBytes()
	err = withManager(ctx, func(m *bgtask.Manager) error {
		views := make([]bgtask.Owner, owners)
		inboxes := make([]*bgtask.Inbox, owners)
		for i := range owners {
			views[i] = m.Owner(fmt.Sprint("owner-", i))
			ib, err := views[i].Inbox()
			if err != nil {
				return err
			}
			inboxes[i] = ib
		}
		// Batches of 10 tasks per owner, so that no inbox grows large.
		const batch = 10
		var buf []bgtype.Event
		for done := 0; done < perOwner; done += batch {
			n := min(batch, perOwner-done)
			for _, o := range views {
				for range n {
					if _, err := o.Spawn(ctx, answer); err != nil {
						return err
					}
				}
			}
			for _, ib := range inboxes {
				var err error
				if buf, err = awaitKind(ctx, ib, bgtype.EventCompleted, n, buf); err != nil {
					return err
				}
			}
		}
		buf = nil
		heap := float64(int64(heapBytes()) - int64(before))
		records := 0
		for _, o := range views {
			snap, err := m.Store().Load(ctx, o.ID())
			if err != nil {
				return err
			}
			records += len(snap.Tasks)
		}
		if records == 0 {
			return fmt.Errorf("no record kept")
		}
		s = sample{v: heap / float64(records), note: fmt.Sprintf("%s records kept of %s tasks run", commas(float64(records)), commas(float64(owners*perOwner)))}
		return nil
	})
	return s, err
}
