package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// sample is one measurement of one row by one contender. For a time row v
// is nanoseconds per task (or row), bytes and allocs per task; for a memory
// row v is bytes (or megabytes) and the rest is unused.
type sample struct {
	v, bytes, allocs float64
	note             string // shown under the table (the last round's)
}

// meter accumulates wall time and allocations over the timed parts of a
// sample, so that setup between them is left out.
type meter struct {
	elapsed        time.Duration
	bytes, mallocs uint64
	t0             time.Time
	ms0            runtime.MemStats
}

func (m *meter) start() {
	runtime.ReadMemStats(&m.ms0)
	m.t0 = time.Now()
}

func (m *meter) stop() {
	d := time.Since(m.t0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.elapsed += d
	m.bytes += ms.TotalAlloc - m.ms0.TotalAlloc
	m.mallocs += ms.Mallocs - m.ms0.Mallocs
}

// per returns the sample of the timed parts divided over ops tasks.
func (m *meter) per(ops int) sample {
	n := float64(ops)
	return sample{v: float64(m.elapsed.Nanoseconds()) / n, bytes: float64(m.bytes) / n, allocs: float64(m.mallocs) / n}
}

// timed runs f once under a fresh meter after a garbage collection and
// returns its figures per task.
func timed(ops int, f func() error) (sample, error) {
	runtime.GC()
	var m meter
	m.start()
	err := f()
	m.stop()
	return m.per(ops), err
}

// liveBytes returns the heap and the goroutine stacks in use after a full
// collection.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// heapBytes returns the heap in use after a full collection, without the
// stacks the runtime keeps cached.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// results holds, per group, row and contender, the samples of every round;
// skipped[g] says why a group did not run.
type results struct {
	samples map[*group][][nCols][]sample
	skipped map[*group]string
}

// measure runs the rounds, interleaved: each round measures every group's
// every contender once, in the same order.
func measure(ctx context.Context, cfg config, groups []*group, errw io.Writer) (results, error) {
	res := results{samples: map[*group][][nCols][]sample{}, skipped: map[*group]string{}}
	for _, g := range groups {
		if g.skip != nil {
			if why := g.skip(cfg); why != "" {
				res.skipped[g] = why
				continue
			}
		}
		res.samples[g] = make([][nCols][]sample, len(g.rows))
	}
	for r := range cfg.rounds {
		for _, g := range groups {
			if _, skip := res.skipped[g]; skip {
				continue
			}
			for c, fn := range g.runs {
				if fn == nil {
					continue
				}
				if err := ctx.Err(); err != nil {
					return res, err
				}
				fmt.Fprintf(errw, "round %d/%d: %s, %s\n", r+1, cfg.rounds, g.name, colNames[c])
				got, err := fn(ctx, cfg)
				if err != nil {
					return res, fmt.Errorf("%s, %s: %w", g.name, colNames[c], err)
				}
				if len(got) != len(g.rows) {
					return res, fmt.Errorf("%s, %s: %d samples for %d rows", g.name, colNames[c], len(got), len(g.rows))
				}
				for i, s := range got {
					res.samples[g][i][c] = append(res.samples[g][i][c], s)
				}
			}
		}
	}
	return res, nil
}

// median returns the median of each field of ss (for an even count, the
// mean of the two middle values) and the last sample's note; ok is false
// for no samples.
func median(ss []sample) (s sample, ok bool) {
	if len(ss) == 0 {
		return sample{}, false
	}
	mid := func(get func(sample) float64) float64 {
		vs := make([]float64, len(ss))
		for i, s := range ss {
			vs[i] = get(s)
		}
		slices.Sort(vs)
		n := len(vs)
		if n%2 == 1 {
			return vs[n/2]
		}
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return sample{
		v:      mid(func(s sample) float64 { return s.v }),
		bytes:  mid(func(s sample) float64 { return s.bytes }),
		allocs: mid(func(s sample) float64 { return s.allocs }),
		note:   ss[len(ss)-1].note,
	}, true
}
