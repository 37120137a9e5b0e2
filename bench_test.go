package bgtask_test

// Benchmarks of the hot paths, each next to a raw-Go reference so that a
// change can be judged by the ratio. Their names are compared across
// changes: do not rename them.
//
//	go test -run='^$' -bench=. -count=3 .
//
// BenchmarkCancelTree* build and wait for a 100-task subtree outside the
// timer in every iteration, so the untimed work is far larger than the timed
// one; run them with a fixed count (-benchtime=3000x) when time matters.

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

const benchOwner = "bench-owner"

func newBenchManager(b *testing.B) *bgtask.Manager {
	b.Helper()
	m, err := bgtask.New()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func shutdownBench(b *testing.B, m *bgtask.Manager) {
	b.Helper()
	if err := m.Shutdown(context.Background()); err != nil {
		b.Fatalf("Shutdown: %v", err)
	}
}

// parked is a task function that blocks until its task is cancelled.
func parked(ctx context.Context, _ *bgtask.Task) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// BenchmarkSpawnComplete is one task's whole life as its owner sees it:
// spawn through an Owner view, run, commit, and the completed event drained
// from the owner's inbox.
func BenchmarkSpawnComplete(b *testing.B) {
	m := newBenchManager(b)
	defer shutdownBench(b, m)
	o := m.Owner(benchOwner)
	ib, err := o.Inbox()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context, *bgtask.Task) (any, error) { return 42, nil }
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id, err := o.Spawn(ctx, fn)
		if err != nil {
			b.Fatalf("Spawn: %v", err)
		}
		for done := false; !done; {
			if err := ib.Wait(ctx); err != nil {
				b.Fatalf("Inbox.Wait: %v", err)
			}
			buf = ib.AppendDrain(buf[:0])
			for i := range buf {
				if buf[i].TaskID != id {
					continue
				}
				if buf[i].Kind != bgtype.EventCompleted || string(buf[i].Result) != "42" {
					b.Fatalf("event %+v, want completed with result 42", buf[i])
				}
				done = true
			}
		}
	}
}

// BenchmarkRawGoCtxResultChan is the reference for BenchmarkSpawnComplete:
// a goroutine with its own cancellable context sending the same result.
func BenchmarkRawGoCtxResultChan(b *testing.B) {
	bg := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(bg)
		res := make(chan any, 1)
		go func() {
			if ctx.Err() != nil {
				res <- nil
				return
			}
			res <- 42
		}()
		if v := <-res; v != 42 {
			b.Fatalf("got %v, want 42", v)
		}
		cancel()
	}
}

// emitTask starts a long-lived task with WakeOnActivity and returns its
// handle, the owner's inbox and a function that ends the task and shuts the
// manager down.
func emitTask(b *testing.B) (*bgtask.Task, *bgtask.Inbox, func()) {
	return emitTaskWake(b, bgtype.WakeOnActivity)
}

// emitTaskWake is emitTask with the given wake policy.
func emitTaskWake(b *testing.B, wake bgtype.WakePolicy) (*bgtask.Task, *bgtask.Inbox, func()) {
	b.Helper()
	m := newBenchManager(b)
	o := m.Owner(benchOwner)
	ib, err := o.Inbox()
	if err != nil {
		b.Fatal(err)
	}
	handle := make(chan *bgtask.Task, 1)
	if _, err := o.Spawn(context.Background(), func(ctx context.Context, t *bgtask.Task) (any, error) {
		handle <- t
		<-ctx.Done()
		return nil, ctx.Err()
	}, bgtask.WithWake(wake)); err != nil {
		b.Fatal(err)
	}
	return <-handle, ib, func() { shutdownBench(b, m) }
}

// BenchmarkEmitDrain is one custom event with an int payload, emitted by a
// task and drained by its owner.
func BenchmarkEmitDrain(b *testing.B) {
	t, ib, stop := emitTask(b)
	defer stop()
	buf := make([]bgtype.Event, 0, 4)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := t.Emit("progress", i); err != nil {
			b.Fatalf("Emit: %v", err)
		}
		buf = ib.AppendDrain(buf[:0])
		if len(buf) != 1 || buf[0].Kind != bgtype.EventCustom {
			b.Fatalf("drained %+v, want one custom event", buf)
		}
	}
}

// BenchmarkEmitQuietDrain is BenchmarkEmitDrain under the default wake
// policy: the event is quiet and coalesced, and kept as the task's progress.
func BenchmarkEmitQuietDrain(b *testing.B) {
	t, ib, stop := emitTaskWake(b, bgtype.WakeOnTerminal)
	defer stop()
	buf := make([]bgtype.Event, 0, 4)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if err := t.Emit("progress", i); err != nil {
			b.Fatalf("Emit: %v", err)
		}
		buf = ib.AppendDrain(buf[:0])
		if len(buf) != 1 || !buf[0].Quiet {
			b.Fatalf("drained %+v, want one quiet custom event", buf)
		}
	}
}

// BenchmarkEmitDrainMapPayload is BenchmarkEmitDrain with a map payload,
// which goes through encoding/json.
func BenchmarkEmitDrainMapPayload(b *testing.B) {
	t, ib, stop := emitTask(b)
	defer stop()
	buf := make([]bgtype.Event, 0, 4)
	payload := map[string]int{"percent": 0}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		payload["percent"] = i
		if err := t.Emit("progress", payload); err != nil {
			b.Fatalf("Emit: %v", err)
		}
		buf = ib.AppendDrain(buf[:0])
		if len(buf) != 1 || buf[0].Kind != bgtype.EventCustom {
			b.Fatalf("drained %+v, want one custom event", buf)
		}
	}
}

// BenchmarkRawChanSendRecv is the reference for BenchmarkEmitDrain: the same
// int payload through a buffered channel of any.
func BenchmarkRawChanSendRecv(b *testing.B) {
	ch := make(chan any, 1)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		ch <- i
		if v := <-ch; v != i {
			b.Fatalf("got %v, want %d", v, i)
		}
	}
}

// benchCancelTree measures CancelTree of a fresh 100-task subtree (a root
// with 99 attached children) in a manager that also runs others parked
// tasks, spread over 100 owners.
func benchCancelTree(b *testing.B, others int) {
	const subtree = 100
	m := newBenchManager(b)
	defer shutdownBench(b, m)
	ctx := context.Background()
	for i := range others {
		if _, err := m.Owner(fmt.Sprintf("other-%d", i%100)).Spawn(ctx, parked); err != nil {
			b.Fatalf("spawn other %d: %v", i, err)
		}
	}
	o := m.Owner(benchOwner)
	ids := make([]string, 0, subtree)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		ids = ids[:0]
		root, err := o.Spawn(ctx, parked)
		if err != nil {
			b.Fatalf("spawn root: %v", err)
		}
		ids = append(ids, root)
		for range subtree - 1 {
			id, err := o.Spawn(ctx, parked, bgtask.WithParent(bgtype.Parent{TaskID: root}))
			if err != nil {
				b.Fatalf("spawn child: %v", err)
			}
			ids = append(ids, id)
		}
		b.StartTimer()

		n, err := m.CancelTree(ctx, root)

		b.StopTimer()
		if err != nil || n != subtree {
			b.Fatalf("CancelTree = %d, %v; want %d, nil", n, err, subtree)
		}
		for _, id := range ids {
			meta, err := o.Wait(ctx, id)
			if err != nil || meta.Status != bgtype.StatusCanceled {
				b.Fatalf("Wait(%s) = %s, %v; want cancelled", id, meta.Status, err)
			}
		}
		if ib, _ := o.Inbox(); ib != nil {
			ib.Drain()
		}
		b.StartTimer()
	}
}

// BenchmarkCancelTree cancels a 100-task subtree next to 100,000 other
// running tasks: its cost must not depend on them.
func BenchmarkCancelTree(b *testing.B) { benchCancelTree(b, 100_000) }

// BenchmarkCancelTreeSmallManager is BenchmarkCancelTree without the others.
func BenchmarkCancelTreeSmallManager(b *testing.B) { benchCancelTree(b, 0) }

// parkedK is how many tasks or goroutines the memory benchmarks park.
const parkedK = 10_000

// liveBytes returns the heap and stack in use after a full collection.
func liveBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// warmGoroutines starts and ends k goroutines, so that the runtime's own
// goroutine descriptors are already allocated (and reused) when measuring:
// both memory benchmarks then count the same things.
func warmGoroutines(k int) {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range k {
		wg.Go(func() { <-stop })
	}
	close(stop)
	wg.Wait()
}

// BenchmarkParkedTaskMemory reports the bytes (heap and stack) that one task
// parked on <-ctx.Done() holds, in a fresh Manager: the task, its context,
// its goroutine's stack and its stored record.
func BenchmarkParkedTaskMemory(b *testing.B) {
	warmGoroutines(parkedK)
	ctx := context.Background()
	var total, runs float64
	b.ReportAllocs()
	for b.Loop() {
		m := newBenchManager(b)
		o := m.Owner(benchOwner)
		var started sync.WaitGroup
		started.Add(parkedK)
		fn := func(ctx context.Context, _ *bgtask.Task) (any, error) {
			started.Done()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		before := liveBytes()
		for range parkedK {
			if _, err := o.Spawn(ctx, fn); err != nil {
				b.Fatalf("Spawn: %v", err)
			}
		}
		started.Wait()
		after := liveBytes()
		total += float64(int64(after) - int64(before))
		runs++
		shutdownBench(b, m)
	}
	b.ReportMetric(total/runs/parkedK, "B/task")
}

// BenchmarkParkedRawGoroutineMemory is the reference for
// BenchmarkParkedTaskMemory: raw goroutines parked on a channel.
func BenchmarkParkedRawGoroutineMemory(b *testing.B) {
	warmGoroutines(parkedK)
	var total, runs float64
	b.ReportAllocs()
	for b.Loop() {
		var started, ended sync.WaitGroup
		stop := make(chan struct{})
		started.Add(parkedK)
		before := liveBytes()
		for range parkedK {
			ended.Go(func() {
				started.Done()
				<-stop
			})
		}
		started.Wait()
		after := liveBytes()
		total += float64(int64(after) - int64(before))
		runs++
		close(stop)
		ended.Wait()
	}
	b.ReportMetric(total/runs/parkedK, "B/goroutine")
}

// heapBytes returns the heap in use after a full collection: what is
// reachable, without the goroutine stacks the runtime keeps cached.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemoryStoreHeap reports the heap a Manager with default options
// keeps after n short tasks across 1,000 owners have ended and their events
// were drained: in all (heap-MB), per task run (B/task) and per record the
// store still holds (B/record). Retention bounds it, so the heap after 1M
// tasks stays near the heap after 100k. Each run is long: use
// -benchtime=1x.
//
//	go test -run='^$' -bench=MemoryStoreHeap -benchtime=1x -count=5 .
func BenchmarkMemoryStoreHeap(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint("tasks=", n), func(b *testing.B) {
			const owners, perOwner = 1000, 10 // a batch is perOwner tasks of every owner
			var heap, records float64
			for b.Loop() {
				before := heapBytes()
				m := newBenchManager(b)
				ctx := context.Background()
				fn := func(context.Context, *bgtask.Task) (any, error) { return nil, nil }
				views := make([]bgtask.Owner, owners)
				inboxes := make([]*bgtask.Inbox, owners)
				for i := range owners {
					views[i] = m.Owner(fmt.Sprint("owner-", i))
					ib, err := views[i].Inbox()
					if err != nil {
						b.Fatal(err)
					}
					inboxes[i] = ib
				}
				var evs []bgtype.Event
				for range n / (owners * perOwner) {
					for range perOwner {
						for _, o := range views {
							if _, err := o.Spawn(ctx, fn); err != nil {
								b.Fatalf("Spawn: %v", err)
							}
						}
					}
					for _, ib := range inboxes {
						for got := 0; got < perOwner; {
							if err := ib.Wait(ctx); err != nil {
								b.Fatal(err)
							}
							evs = ib.AppendDrain(evs[:0])
							got += len(evs)
						}
					}
				}
				evs = nil
				heap = float64(int64(heapBytes()) - int64(before))
				records = 0
				for _, o := range views {
					snap, err := m.Store().Load(ctx, o.ID())
					if err != nil {
						b.Fatal(err)
					}
					records += float64(len(snap.Tasks))
				}
				shutdownBench(b, m)
			}
			b.ReportMetric(heap/(1<<20), "heap-MB")
			b.ReportMetric(heap/float64(n), "B/task")
			b.ReportMetric(heap/records, "B/record")
			b.ReportMetric(records, "records")
		})
	}
}

// burstK is how many tasks the burst benchmarks start before awaiting any.
const burstK = 10_000

// BenchmarkSpawnBurst10k spawns burstK short tasks for one owner, then
// awaits every one through the owner's inbox. One iteration is the whole
// burst; the ns/op divided by burstK is the cost per task.
func BenchmarkSpawnBurst10k(b *testing.B) {
	m := newBenchManager(b)
	defer shutdownBench(b, m)
	o := m.Owner(benchOwner)
	ib, err := o.Inbox()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context, *bgtask.Task) (any, error) { return 42, nil }
	buf := make([]bgtype.Event, 0, burstK)
	b.ReportAllocs()
	for b.Loop() {
		for range burstK {
			if _, err := o.Spawn(ctx, fn); err != nil {
				b.Fatalf("Spawn: %v", err)
			}
		}
		for got := 0; got < burstK; {
			if err := ib.Wait(ctx); err != nil {
				b.Fatalf("Inbox.Wait: %v", err)
			}
			buf = ib.AppendDrain(buf[:0])
			for i := range buf {
				if buf[i].Kind != bgtype.EventCompleted {
					b.Fatalf("event %+v, want completed", buf[i])
				}
			}
			got += len(buf)
		}
	}
}

// BenchmarkRawBurst10k is the reference for BenchmarkSpawnBurst10k:
// burstK goroutines, each with its own cancellable context, sending their
// result to one channel that is read burstK times.
func BenchmarkRawBurst10k(b *testing.B) {
	bg := context.Background()
	res := make(chan any, burstK)
	b.ReportAllocs()
	for b.Loop() {
		for range burstK {
			ctx, cancel := context.WithCancel(bg)
			go func() {
				defer cancel()
				if ctx.Err() != nil {
					res <- nil
					return
				}
				res <- 42
			}()
		}
		for range burstK {
			if v := <-res; v != 42 {
				b.Fatalf("got %v, want 42", v)
			}
		}
	}
}

// idleOwners is how many owners BenchmarkIdlePluginMemory binds a Plugin for.
const idleOwners = 100_000

// BenchmarkIdlePluginMemory reports the heap one idle owner holds (B/owner):
// a Plugin bound by NewPlugin, with no task, either before its first run
// or after one RunStart/RunEnd. The owner ids and the slice that keeps the
// Plugins are made before the first measure: a host holds them anyway. Each
// run is long: use -benchtime=1x.
//
//	go test -run='^$' -bench=IdlePluginMemory -benchtime=1x -count=5 .
func BenchmarkIdlePluginMemory(b *testing.B) {
	ids := make([]string, idleOwners)
	for i := range ids {
		ids[i] = fmt.Sprintf("owner-%06d", i)
	}
	for _, oneRun := range []bool{false, true} {
		b.Run(fmt.Sprint("run=", oneRun), func(b *testing.B) {
			ctx := context.Background()
			plugins := make([]*agent.Plugin, idleOwners)
			var total, runs float64
			b.ReportAllocs()
			for b.Loop() {
				m := newBenchManager(b)
				before := heapBytes()
				for i, id := range ids {
					p, err := agent.NewPlugin(m, id, agent.Config{})
					if err != nil {
						b.Fatalf("NewPlugin: %v", err)
					}
					if oneRun {
						run := bgtask.RunInfo{RunID: "run-1"}
						if err := p.RunStart(ctx, run); err != nil {
							b.Fatalf("RunStart: %v", err)
						}
						if err := p.RunEnd(ctx, bgtask.RunOutcome{RunID: run.RunID}); err != nil {
							b.Fatalf("RunEnd: %v", err)
						}
					}
					plugins[i] = p
				}
				after := heapBytes()
				total += float64(int64(after) - int64(before))
				runs++
				for i, p := range plugins {
					if err := p.Close(ctx); err != nil {
						b.Fatalf("Close: %v", err)
					}
					plugins[i] = nil
				}
				shutdownBench(b, m)
			}
			b.ReportMetric(total/runs/idleOwners, "B/owner")
		})
	}
}
