package bgtask

import (
	"context"
	"testing"
)

// spawnCompleteOnce spawns a task returning 42 for o and drains o's inbox
// until its completed event arrives.
func spawnCompleteOnce(t *testing.T, o Owner, ib *Inbox, buf []Event) []Event {
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
				if ev.Kind != EventCompleted || string(ev.Result) != "42" {
					t.Fatalf("event %+v, want completed with result 42", ev)
				}
				return buf
			}
		}
	}
}

// TestSpawnCompleteAllocs: a spawn, its run and its completion drained from
// the inbox cost at most maxSpawnCompleteAllocs heap allocations with the
// default MemoryStore, counted across every goroutine.
func TestSpawnCompleteAllocs(t *testing.T) {
	const maxSpawnCompleteAllocs = 7
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer shutdownManager(t, m)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]Event, 0, 16)
	buf = spawnCompleteOnce(t, o, ib, buf) // warm up: the owner's state and the inbox's buffer
	got := testing.AllocsPerRun(200, func() { buf = spawnCompleteOnce(t, o, ib, buf) })
	if got > maxSpawnCompleteAllocs {
		t.Errorf("spawn+complete: %v allocations, want at most %d", got, maxSpawnCompleteAllocs)
	}
}
