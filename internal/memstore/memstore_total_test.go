package memstore

import (
	"errors"
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
			s := New(WithRetainPerOwner(tc.perOwner), WithRetainTotal(tc.total), WithRetainFor(0))
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
			terminal, all, owners := s.Contents()
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
		opts   []Option
		forget func(t *testing.T, s *Store)
	}{
		{"per owner count", []Option{WithRetainPerOwner(1)}, func(t *testing.T, s *Store) {
			mustCommit(t, s, "a", store.UpsertAction(finished("task_a2", "a", bgtype.StatusCompleted, time.Now())))
		}},
		{"total count", []Option{WithRetainTotal(2)}, func(t *testing.T, s *Store) {
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c1", "c", bgtype.StatusCompleted, time.Now())))
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c2", "c", bgtype.StatusCompleted, time.Now())))
		}},
		{"age", []Option{WithRetainFor(time.Hour)}, func(t *testing.T, s *Store) {
			<-time.After(2 * time.Hour)
			mustCommit(t, s, "c", store.UpsertAction(finished("task_c1", "c", bgtype.StatusCompleted, time.Now())))
		}},
		{"remove", nil, func(t *testing.T, s *Store) {
			mustCommit(t, s, "a", store.RemoveAction("task_x"))
		}},
		{"replace all", nil, func(t *testing.T, s *Store) {
			mustCommit(t, s, "a", store.ReplaceAllAction(rmeta("task_a9", "a", bgtype.StatusRunning)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(tc.opts...)
				mustCommit(t, s, "b", store.UpsertAction(finished("task_b1", "b", bgtype.StatusCompleted, time.Now())))
				wp := commitOwned(t, s, "a", "task_x")
				tc.forget(t, s)
				if _, err := s.Get(t.Context(), "task_x"); !errors.Is(err, bgtype.ErrNotFound) {
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
func commitOwned(t *testing.T, s *Store, owner, id string) weak.Pointer[Rec] {
	t.Helper()
	u := bgtype.TaskMeta{ID: id, Owner: owner, Status: bgtype.StatusCompleted, FinishedAt: time.Now()}
	e := newLive(&u)
	if err := s.CommitOne(t.Context(), &u, e); err != nil {
		t.Fatal(err)
	}
	sh := s.shardOf(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return weak.Make(&sh.byID[id].Rec)
}
