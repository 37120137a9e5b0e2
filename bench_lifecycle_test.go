package bgtask

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"
)

// serveThread is one request of a server's thread, start to end: a
// Plugin made, one run in which a task is spawned, completes and is
// delivered, then the run ended and the Plugin closed.
func serveThread(tb testing.TB, m *Manager, owner string) {
	p, err := m.NewReceiver(owner, ReceiverConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := p.RunStart(context.Background(), RunInfo{RunID: "run-1"}); err != nil {
		tb.Fatal(err)
	}
	ctx := WithToolCall(context.Background(), ToolCall{RunID: "run-1", CallID: "call-1"})
	id, err := p.Owner().Spawn(ctx, func(context.Context, *Task) (any, error) { return "ok", nil })
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.Wait(context.Background(), id); err != nil && !errors.Is(err, ErrNotFound) { // retention may drop it at once
		tb.Fatal(err)
	}
	if msgs, err := p.Deliver(context.Background()); err != nil || len(msgs) != 1 {
		tb.Fatalf("Deliver = %d messages, %v; want 1", len(msgs), err)
	}
	if err := p.RunEnd(context.Background(), RunOutcome{RunID: "run-1"}); err != nil {
		tb.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkClosedThreadsHeap measures what a Manager keeps for threads a
// server is done with: 10,000 threads each serve one request and are
// closed; the Manager's live heap is compared with its level after 10 such
// threads. "one by one": each thread is served and closed before the next
// (serveThread); "all open": every thread's Plugin is made and its task
// spawned before any is delivered and closed, so the Manager held 10,000
// live owners at once. The store keeps no terminal record (retention 0), so
// what is measured is the Manager's own. It reports the heap above the
// level before New after 10 and after 10,000 threads, the bytes left per
// closed thread, and their ratio (heap-10k/heap-10, want at most 2).
func BenchmarkClosedThreadsHeap(b *testing.B) {
	const few, many = 10, 10_000
	for _, tc := range []struct {
		name  string
		serve func(testing.TB, *Manager, int, int)
	}{
		{"one by one", func(tb testing.TB, m *Manager, from, to int) {
			for i := from; i < to; i++ {
				serveThread(tb, m, fmt.Sprint("thread-", i))
			}
		}},
		{"all open", serveThreadsAtOnce},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var at10, at10k float64
			for b.Loop() {
				base := liveHeap()
				m, err := New(WithStore(memstore.New(memstore.WithRetainPerOwner(0))))
				if err != nil {
					b.Fatal(err)
				}
				tc.serve(b, m, 0, few)
				h10 := liveHeap()
				tc.serve(b, m, few, many)
				h10k := liveHeap()
				if got := perOwnerState(m); !emptyState(got) {
					b.Fatalf("after Close of every thread the Manager keeps %v", got)
				}
				runtime.KeepAlive(m)
				if err := m.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				at10, at10k = float64(h10)-float64(base), float64(h10k)-float64(base)
			}
			b.ReportMetric(at10, "heap-10-B")
			b.ReportMetric(at10k, "heap-10k-B")
			b.ReportMetric((at10k-at10)/(many-few), "B/closed-thread")
			b.ReportMetric(at10k/at10, "ratio")
		})
	}
}

// serveThreadsAtOnce serves threads from..to-1 as serveThread does, but in
// phases: every Plugin is made and its run started and task spawned first,
// then each task waited for and delivered, then every run ended and
// Plugin closed.
func serveThreadsAtOnce(tb testing.TB, m *Manager, from, to int) {
	ctx := context.Background()
	ps := make([]*Receiver, 0, to-from)
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		p, err := m.NewReceiver(fmt.Sprint("thread-", i), ReceiverConfig{})
		if err != nil {
			tb.Fatal(err)
		}
		if err := p.RunStart(ctx, RunInfo{RunID: "run-1"}); err != nil {
			tb.Fatal(err)
		}
		id, err := p.Owner().Spawn(WithToolCall(ctx, ToolCall{RunID: "run-1", CallID: "call-1"}), func(context.Context, *Task) (any, error) { return "ok", nil })
		if err != nil {
			tb.Fatal(err)
		}
		ps, ids = append(ps, p), append(ids, id)
	}
	for i, p := range ps {
		if _, err := m.Wait(ctx, ids[i]); err != nil && !errors.Is(err, ErrNotFound) {
			tb.Fatal(err)
		}
		if msgs, err := p.Deliver(ctx); err != nil || len(msgs) != 1 {
			tb.Fatalf("Deliver = %d messages, %v; want 1", len(msgs), err)
		}
	}
	for _, p := range ps {
		if err := p.RunEnd(ctx, RunOutcome{RunID: "run-1"}); err != nil {
			tb.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}
