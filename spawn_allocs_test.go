package bgtask

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

// spawnCompleteOnce spawns a task returning 42 for o and drains o's inbox
// until its completed event arrives.
func spawnCompleteOnce(t *testing.T, o Owner, ib *Inbox, buf []bgtype.Event) []bgtype.Event {
	t.Helper()
	ctx := context.Background()
	id, err := o.Spawn(ctx, func(context.Context, *Task) (any, error) { return 42, nil })
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	for {
		if err := ib.Wait(ctx); err != nil {
			t.Fatalf("Inbox.Wait: %v", err)
		}
		buf = ib.AppendDrain(buf[:0])
		for _, ev := range buf {
			if ev.TaskID == id {
				if ev.Kind != bgtype.EventCompleted || string(ev.Result) != "42" {
					t.Fatalf("event %+v, want completed with result 42", ev)
				}
				return buf
			}
		}
	}
}

// TestSpawnCompleteAllocs: a spawn, its run and its completion drained from
// the inbox cost at most the given heap allocations with a MemoryStore,
// counted across every goroutine. Below its retention limits the store
// makes the compact copy of each finished record (one allocation more, so
// that retention keeps ~320 instead of ~630 bytes a record); at its limits
// every ended task forgets a record and reuses its memory.
func TestSpawnCompleteAllocs(t *testing.T) {
	tests := []struct {
		name  string
		store *memstore.Store
		max   float64
	}{
		{"default store, below its limits", memstore.New(), 7},
		{"store at its per-owner limit", memstore.New(memstore.WithRetainPerOwner(10)), 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(WithStore(tc.store))
			if err != nil {
				t.Fatal(err)
			}
			defer shutdownManager(t, m)
			o := m.Owner("thread-1")
			ib, err := o.Inbox()
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]bgtype.Event, 0, 16)
			for range 20 { // warm up: the owner's state, the inbox's buffer, the store's limit
				buf = spawnCompleteOnce(t, o, ib, buf)
			}
			got := testing.AllocsPerRun(200, func() { buf = spawnCompleteOnce(t, o, ib, buf) })
			if got > tc.max {
				t.Errorf("spawn+complete: %v allocations, want at most %v", got, tc.max)
			}
		})
	}
}
