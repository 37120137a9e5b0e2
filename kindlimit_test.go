package bgtask

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/bgtype"
)

// TestKindMaxRunningProcess: with a store that is not a KindLimiter (the
// memory store here), MaxRunning holds in the process: of 5 spawns of a
// kind capped at 2, 2 run their function, the others wait for a slot and
// run as slots free; each runs once, all complete.
func TestKindMaxRunningProcess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var (
			mu            sync.Mutex // guards running, most, runs
			running, most int
		)
		release := make(chan struct{})
		runs := map[string]int{}
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, _ crawlSpec, _ *Checkpoint[crawlCursor]) (any, error) {
			mu.Lock()
			running++
			most = max(most, running)
			runs[tk.ID()]++
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			mu.Unlock()
			return nil, nil
		}, KindConfig{MaxRunning: 2})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		var ids []string
		for range 5 {
			id, err := k.Spawn(t.Context(), o, crawlSpec{})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		for i := 5; i > 0; i-- {
			synctest.Wait()
			mu.Lock()
			got := running
			mu.Unlock()
			if got != min(i, 2) {
				t.Fatalf("%d running with %d left, want %d", got, i, min(i, 2))
			}
			release <- struct{}{}
		}
		for _, id := range ids {
			waitStatus(t, o, id, bgtype.StatusCompleted)
			if runs[id] != 1 {
				t.Fatalf("%s ran %d times", id, runs[id])
			}
		}
		if most != 2 {
			t.Fatalf("at most %d ran at once, want 2", most)
		}
	})
}
