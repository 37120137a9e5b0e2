package bgtask

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

// A spawned task's live record is the compact one the MemoryStore keeps
// (no copy, no side struct for a plain spawn); a named task's identity
// lives in one side struct that its terminal copy shares, and the live
// record's mutable part follows the store while the identity stays.
func TestSpawnedRecordCompact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      []SpawnOption
		wantIdent bool
		wantRare  bool
	}{
		{"plain", nil, false, false},
		{"named", []SpawnOption{WithName("n")}, true, false},
		{"described", []SpawnOption{WithDescription("d")}, false, true},
		{"tagged", []SpawnOption{WithTags("a")}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t)
			tasks := make(chan *Task, 1)
			release := make(chan struct{})
			id, err := m.Owner("o").Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				tasks <- tk
				<-release
				return 42, nil
			}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			tk := <-tasks
			if m.mem.Kept(id) != tk.rec {
				t.Fatal("the store does not keep the Task's own record")
			}
			hasIdent, hasRare, ident := tk.rec.Parts()
			if got := hasIdent; got != tc.wantIdent {
				t.Errorf("ident set = %v, want %v", got, tc.wantIdent)
			}
			if got := hasRare; got != tc.wantRare {
				t.Errorf("rare set = %v, want %v", got, tc.wantRare)
			}
			close(release)
			if _, err := m.Owner("o").Wait(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			got, err := m.mem.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != bgtype.StatusCompleted || string(got.Result) != "42" || got.ID != id || got.Owner != "o" {
				t.Fatalf("record %+v, want o's %s completed with 42", got, id)
			}
			done := m.mem.Kept(id)
			_, _, doneIdent := done.Parts()
			if done == tk.rec || doneIdent != ident {
				t.Fatalf("terminal record: own copy %v, shared ident %v; want a copy sharing the ident", done != tk.rec, doneIdent == ident)
			}
			if tk.rec.ID != id || tk.rec.Owner != "o" || tk.rec.Name() != map[bool]string{true: "n"}[tc.name == "named"] {
				t.Fatalf("the Task's identity changed: %q %q %q", tk.rec.ID, tk.rec.Owner, tk.rec.Name())
			}
		})
	}
}

// Through a Manager, tasks of many owners: the store keeps what its limits
// say, the most recently finished first, and no bookkeeping for an owner
// left without records; the Manager keeps nothing of ended tasks.
func TestMemoryManagerRetainsAcrossOwners(t *testing.T) {
	t.Parallel()
	const owners, tasks = 4, 12 // task i belongs to owner i%owners and ends i-th
	tests := []struct {
		name            string
		perOwner, total int
		wantKept        []int // task numbers, oldest first
	}{
		{"total", 2, 3, []int{9, 10, 11}},
		{"per owner", 1, 100, []int{8, 9, 10, 11}},
		{"per owner then total", 2, 6, []int{6, 7, 8, 9, 10, 11}},
		{"none", 0, 100, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(memstore.WithRetainPerOwner(tc.perOwner), memstore.WithRetainTotal(tc.total))
				m := newTestManager(t, WithStore(store))
				fn := func(context.Context, *Task) (any, error) { return nil, nil }
				var spawned []string
				for i := range tasks {
					spawned = append(spawned, spawnFor(t, m, fmt.Sprint("owner-", i%owners), fn))
					synctest.Wait() // it has ended and retired: tasks end in spawn order
				}
				var want, wantOwners []string
				for _, i := range tc.wantKept {
					want = append(want, spawned[i])
					wantOwners = append(wantOwners, fmt.Sprint("owner-", i%owners))
				}
				slices.Sort(wantOwners)
				wantOwners = slices.Compact(wantOwners)
				terminal, _, gotOwners := store.Contents()
				if !slices.Equal(terminal, want) {
					t.Fatalf("store keeps %v, want %v", terminal, want)
				}
				if !slices.Equal(gotOwners, wantOwners) {
					t.Fatalf("store keeps owners %v, want %v", gotOwners, wantOwners)
				}
				in := readInternals(m, store)
				if in.nodes != 0 || in.owners != 0 || in.runs != 0 || in.active != 0 || in.storeIDs != len(want) {
					t.Fatalf("after %d tasks: %+v", tasks, in)
				}
				shutdownManager(t, m)
			})
		})
	}
}
