package bgtask

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// storeState is what a MemoryStore holds, read under its lock: the
// terminal records in the order retention forgets them, every id, and the
// owners it keeps bookkeeping for, each sorted but the first.
func storeState(s *MemoryStore) (terminal, all, owners []string) {
	st := s.state()
	for _, e := range st.terminal {
		terminal = append(terminal, e.id())
	}
	for o := range st.owners {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	return terminal, st.ids, owners
}

// WithRetainTotal bounds the terminal records of all owners together, the first
// committed terminal going first whoever owns them, on top of the count per
// owner; live records are never dropped, and an owner left without records
// is forgotten.
func TestMemoryStoreRetainTotal(t *testing.T) {
	t.Parallel()
	// Each commit is "owner/id" and makes the record terminal; "a/live" and
	// "c/queued" are committed first and never end.
	tests := []struct {
		name            string
		perOwner, total int
		commits         []string
		wantTerminal    []string // oldest first
		wantOwners      []string
	}{
		{
			name: "total 0 keeps none", perOwner: 100, total: 0,
			commits:      []string{"a/1", "b/2", "c/3"},
			wantTerminal: nil, wantOwners: []string{"a", "c"},
		},
		{
			name: "total 1 keeps the newest", perOwner: 100, total: 1,
			commits:      []string{"a/1", "b/2", "c/3", "b/4"},
			wantTerminal: []string{"b/4"}, wantOwners: []string{"a", "b", "c"},
		},
		{
			name: "oldest first across owners", perOwner: 100, total: 4,
			commits:      []string{"b/1", "a/2", "b/3", "c/4", "a/5", "d/6", "c/7", "a/8"},
			wantTerminal: []string{"a/5", "d/6", "c/7", "a/8"}, wantOwners: []string{"a", "c", "d"},
		},
		{
			name: "under the cap nothing goes", perOwner: 100, total: 8,
			commits:      []string{"b/1", "a/2", "b/3", "c/4", "a/5", "d/6", "c/7", "a/8"},
			wantTerminal: []string{"b/1", "a/2", "b/3", "c/4", "a/5", "d/6", "c/7", "a/8"},
			wantOwners:   []string{"a", "b", "c", "d"},
		},
		{
			name: "per owner drops newer than total would", perOwner: 1, total: 3,
			commits:      []string{"b/1", "a/2", "a/3", "c/4"},
			wantTerminal: []string{"b/1", "a/3", "c/4"}, wantOwners: []string{"a", "b", "c"},
		},
		{
			name: "per owner first, then total", perOwner: 2, total: 5,
			commits:      []string{"a/1", "b/2", "a/3", "a/4", "b/5", "c/6", "c/7"},
			wantTerminal: []string{"a/3", "a/4", "b/5", "c/6", "c/7"}, wantOwners: []string{"a", "b", "c"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewMemoryStore(WithRetainPerOwner(tc.perOwner), WithRetainTotal(tc.total), WithRetainFor(0))
			mustCommit(t, s, "a", store.UpsertAction(rmeta("task_live", "a", bgtype.StatusRunning)))
			mustCommit(t, s, "c", store.UpsertAction(rmeta("task_queued", "c", bgtype.StatusQueued)))
			for _, c := range tc.commits {
				owner, n, _ := strings.Cut(c, "/")
				id := "task_" + n
				mustCommit(t, s, owner, store.UpsertAction(rmeta(id, owner, bgtype.StatusRunning)))
				mustCommit(t, s, owner, store.UpsertAction(finished(id, owner, bgtype.StatusCompleted, time.Now())))
			}
			var want []string
			for _, c := range tc.wantTerminal {
				_, n, _ := strings.Cut(c, "/")
				want = append(want, "task_"+n)
			}
			terminal, all, owners := storeState(s)
			if !slices.Equal(terminal, want) {
				t.Fatalf("terminal records kept, oldest first: %v, want %v", terminal, want)
			}
			wantAll := slices.Sorted(slices.Values(append([]string{"task_live", "task_queued"}, want...)))
			if !slices.Equal(all, wantAll) {
				t.Fatalf("records kept: %v, want %v", all, wantAll)
			}
			if !slices.Equal(owners, tc.wantOwners) {
				t.Fatalf("owners kept: %v, want %v", owners, tc.wantOwners)
			}
			for _, id := range []string{"task_live", "task_queued"} {
				if _, err := s.Get(t.Context(), id); err != nil {
					t.Fatalf("live record %s: %v", id, err)
				}
			}
		})
	}
}

// A record the store forgets is released at once, whatever forgets it: no
// queue keeps it reachable until a later compaction (the store's pool of
// forgotten compact entries is emptied by the two collections below). The record to forget
// is not the oldest terminal one of the store (another owner's is), which
// is where an age queue would keep a pointer to it.
func TestMemoryStoreForgottenRecordReleased(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   []MemoryOption
		forget func(t *testing.T, s *MemoryStore)
	}{
		{"per owner count", []MemoryOption{WithRetainPerOwner(1)}, func(t *testing.T, s *MemoryStore) {
			mustCommit(t, s, "a", store.UpsertAction(finished("task_a2", "a", bgtype.StatusCompleted, time.Now())))
		}},
		{"total count", []MemoryOption{WithRetainTotal(2)}, func(t *testing.T, s *MemoryStore) {
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c1", "c", bgtype.StatusCompleted, time.Now())))
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c2", "c", bgtype.StatusCompleted, time.Now())))
		}},
		{"age", []MemoryOption{WithRetainFor(time.Hour)}, func(t *testing.T, s *MemoryStore) {
			<-time.After(2 * time.Hour)
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c1", "c", bgtype.StatusCompleted, time.Now())))
		}},
		{"remove", nil, func(t *testing.T, s *MemoryStore) {
			mustCommit(t, s, "a", store.RemoveAction("task_x"))
		}},
		{"replace all", nil, func(t *testing.T, s *MemoryStore) {
			mustCommit(t, s, "a", store.ReplaceAllAction(rmeta("task_a9", "a", bgtype.StatusRunning)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := NewMemoryStore(tc.opts...)
				mustCommit(t, s, "b", store.UpsertAction(finished("task_b1", "b", bgtype.StatusCompleted, time.Now())))
				wp := commitOwned(t, s, "a", "task_x")
				tc.forget(t, s)
				if _, err := s.Get(t.Context(), "task_x"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get(task_x) = %v, want ErrNotFound", err)
				}
				runtime.GC()
				runtime.GC()
				if wp.Value() != nil {
					t.Fatal("the forgotten record task_x is still reachable")
				}
				runtime.KeepAlive(s) // the store itself is alive: only its hold on task_x is in question
			})
		})
	}
}

// commitOwned commits a terminal record through the Manager's path and
// returns a weak pointer to what the store keeps of it.
//
//go:noinline
func commitOwned(t *testing.T, s *MemoryStore, owner, id string) weak.Pointer[memRec] {
	t.Helper()
	u := bgtype.TaskMeta{ID: id, Owner: owner, Status: bgtype.StatusCompleted, FinishedAt: time.Now()}
	e := newLive(&u)
	if err := s.commitOne(t.Context(), &u, e); err != nil {
		t.Fatal(err)
	}
	sh := s.shardOf(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return weak.Make(&sh.byID[id].rec)
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
				store := NewMemoryStore(WithRetainPerOwner(tc.perOwner), WithRetainTotal(tc.total))
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
				terminal, _, gotOwners := storeState(store)
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
