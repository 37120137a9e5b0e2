package bgtask

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// BenchmarkSpawnCompleteCold is one spawn and its completion at a time, as
// BenchmarkSpawnComplete, with no idle worker: every task runs on a
// goroutine started for it, as an agent's spawns do once the pool's
// workers expired between its turns (a second or two), and, as then, no
// goroutine records ends when it spawns. gostarts/op counts
// the goroutines started per task: the task's, and a recorder's when its
// end is handed to one (decision 815).
func BenchmarkSpawnCompleteCold(b *testing.B) {
	m := newTestManager(b)
	m.workers.SetMax(0)
	o := m.Owner("bench")
	ib, err := o.Inbox()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context, *Task) (any, error) { return 42, nil }
	buf := make([]bgtype.Event, 0, 16)
	starts := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(starts)
	before := starts[0].Value.Uint64()
	b.ReportAllocs()
	for b.Loop() {
		id, err := o.Spawn(ctx, fn)
		if err != nil {
			b.Fatal(err)
		}
		for done := false; !done; {
			if err := ib.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			buf = ib.AppendDrain(buf[:0])
			for i := range buf {
				done = done || buf[i].TaskID == id && string(buf[i].Result) == "42"
			}
		}
		// As after an agent's turn: nothing records ends any more (a
		// recorder, if one was started, has exited) before the next spawn.
		for m.endsBusy.Load() {
			runtime.Gosched()
		}
	}
	metrics.Read(starts)
	b.ReportMetric(float64(starts[0].Value.Uint64()-before)/float64(b.N), "gostarts/op")
}
