package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
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

// An owner's live list in a shard stays when its last live record ends,
// for the owner's next record (no map delete and insert per task), and
// goes once another owner's list empties: at most one empty list per
// shard is kept, and Contents does not count it.
func TestEmptiedLiveListKeptForTheNextRecord(t *testing.T) {
	t.Parallel()
	s := New()
	ids := map[string][]string{} // per owner, ids in one shard
	sh := s.shardOf("task_0")
	for i := 0; len(ids["a"]) < 2 || len(ids["b"]) < 1; i++ {
		id := fmt.Sprint("task_", i)
		if s.shardOf(id) != sh {
			continue
		}
		if len(ids["a"]) < 2 {
			ids["a"] = append(ids["a"], id)
		} else {
			ids["b"] = append(ids["b"], id)
		}
	}
	run := func(owner, id string) {
		t.Helper()
		u := bgtype.TaskMeta{ID: id, Owner: owner, Status: bgtype.StatusRunning}
		if err := s.CommitOne(t.Context(), &u, nil); err != nil {
			t.Fatal(err)
		}
		u.Status, u.FinishedAt = bgtype.StatusCompleted, time.Now()
		if err := s.Commit(t.Context(), owner, store.UpsertAction(u)); err != nil {
			t.Fatal(err)
		}
	}
	listOf := func(owner string) *memList {
		sh.mu.RLock()
		defer sh.mu.RUnlock()
		return sh.owners[owner]
	}

	run("a", ids["a"][0])
	kept := listOf("a")
	if kept == nil || kept.n != 0 {
		t.Fatalf("owner a's live list after its only task ended: %+v, want kept and empty", kept)
	}
	if _, _, owners := s.Contents(); !slices.Equal(owners, []string{"a"}) { // a's terminal record
		t.Fatalf("Contents owners %v, want [a]", owners)
	}
	run("a", ids["a"][1])
	if got := listOf("a"); got != kept {
		t.Fatalf("owner a's next task used list %p, want the kept %p", got, kept)
	}
	run("b", ids["b"][0])
	if got := listOf("a"); got != nil {
		t.Fatalf("owner a's empty list still kept after b's emptied: %+v", got)
	}
	if got := listOf("b"); got == nil || got.n != 0 {
		t.Fatalf("owner b's live list: %+v, want kept and empty", got)
	}
}
