package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// A task's commit locks only its record's shard: while another shard is
// locked, it goes through.
func TestMemoryStoreShardsDoNotBlockEachOther(t *testing.T) {
	t.Parallel()
	s := New()
	a, b := "task_a", ""
	for i := 0; b == ""; i++ {
		if id := fmt.Sprint("task_b", i); s.shardOf(id) != s.shardOf(a) {
			b = id
		}
	}
	sh := s.shardOf(a)
	sh.mu.Lock()
	u := bgtype.TaskMeta{ID: b, Owner: "o", Status: bgtype.StatusRunning}
	err := s.CommitOne(t.Context(), &u, nil) // would wait forever behind one store lock
	sh.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), b); err != nil || got.Status != bgtype.StatusRunning {
		t.Fatalf("Get(%s) = %+v, %v", b, got, err)
	}
}

// Commits from many goroutines, each ending tasks: once they have all
// returned, retention has run for every one of them, exactly: the limits
// hold, none was forgotten beyond them, and every record the terminal index
// forgot is gone from its shard too.
func TestMemoryStoreConcurrentRetention(t *testing.T) {
	t.Parallel()
	const workers, each, owners, perOwner, total = 8, 200, 4, 50, 120
	s := New(WithRetainPerOwner(perOwner), WithRetainTotal(total))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				u := bgtype.TaskMeta{ID: fmt.Sprintf("task_%d_%d", w, i), Owner: fmt.Sprint("o", i%owners),
					Status: bgtype.StatusCompleted, FinishedAt: time.Now()}
				if err := s.CommitOne(context.Background(), &u, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := s.state()
	if len(st.terminal) != total || len(st.ids) != total {
		t.Fatalf("kept %d terminal records, %d ids, want %d", len(st.terminal), len(st.ids), total)
	}
	per := map[string]int{}
	for i, e := range st.terminal {
		per[e.ownerID()]++
		if _, found := slices.BinarySearch(st.ids, e.id()); !found {
			t.Fatalf("terminal record %d (%s) is not in its shard", i, e.id())
		}
	}
	for o, n := range per {
		if n > perOwner {
			t.Errorf("owner %s keeps %d, want at most %d", o, n, perOwner)
		}
	}
}

// While records turn terminal, moving from their shard to the terminal
// index, a Load or a List of their owner sees every one of them exactly
// once: live, or terminal, never missing and never twice.
func TestMemoryStoreReadsDuringTerminalMoves(t *testing.T) {
	t.Parallel()
	const n = 200
	s := New()
	ctx := context.Background()
	for i := range n {
		u := bgtype.TaskMeta{ID: fmt.Sprintf("task_%03d", i), Owner: "o", Status: bgtype.StatusRunning}
		if err := s.CommitOne(ctx, &u, nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			u := bgtype.TaskMeta{ID: fmt.Sprintf("task_%03d", i), Owner: "o", Status: bgtype.StatusCompleted, FinishedAt: time.Now()}
			if err := s.CommitOne(ctx, &u, nil); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 50 {
		snap, err := s.Load(ctx, "o")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Tasks) != n {
			t.Fatalf("Load saw %d records, want %d", len(snap.Tasks), n)
		}
		seen := map[string]bool{}
		for m, err := range s.List(ctx, "o") {
			if err != nil {
				t.Fatal(err)
			}
			if seen[m.ID] {
				t.Fatalf("List yielded %s twice", m.ID)
			}
			seen[m.ID] = true
		}
		if len(seen) != n {
			t.Fatalf("List yielded %d records, want %d", len(seen), n)
		}
	}
	wg.Wait()
}
