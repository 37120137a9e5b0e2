package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testKindClaimer, for a store.KindClaimer only: concurrent ClaimTasks
// of four instances claim each waiting record once, a limited kind only
// up to its limit across them all, the others up to Max each; each claim
// runs on its instance on the attempt it waited for, resumed at the
// claim's time, and comes back as stored, oldest first; records of other
// kinds, closures and ended records stay where they are; an ended claim
// frees its slot; a claim without an instance is an invalid action and
// one of nothing changes nothing.
func testKindClaimer(t *testing.T, c Config) {
	s := c.New(t)
	cl, ok := s.(store.KindClaimer)
	if !ok {
		t.Skip("not a store.KindClaimer")
	}
	const (
		crawl, mail, other = "crawl/v1", "mail/v1", "other/v1"
		limit              = 2
		instances          = 4
		perClaim           = 3
	)
	waiting := func(id, owner, kind string, created int) bgtype.TaskMeta {
		m := rec(id, owner, bgtype.StatusQueued, created)
		m.Attempt = 1
		m.Resume = &bgtype.Resume{Kind: kind, Spec: json.RawMessage(`{"n":1}`), MaxAttempts: 3}
		commit(t, s, owner, store.UpsertAction(m))
		return m
	}
	var crawls, mails []bgtype.TaskMeta
	for i := range 6 {
		crawls = append(crawls, waiting(fmt.Sprintf("task_c%02d", i), "alice", crawl, i))
	}
	for i := range 4 {
		mails = append(mails, waiting(fmt.Sprintf("task_m%02d", i), "bob", mail, 10+i))
	}
	untouched := []bgtype.TaskMeta{waiting("task_other", "alice", other, 1)}
	closure := rec("task_closure", "alice", bgtype.StatusQueued, 2)
	commit(t, s, "alice", store.UpsertAction(closure))
	untouched = append(untouched, closure)
	gone := waiting("task_gone", "alice", crawl, 3)
	gone = ended(gone, bgtype.StatusCanceled, 4)
	commit(t, s, "alice", store.UpsertAction(gone))
	untouched = append(untouched, get(t, s, gone.ID))
	kinds := map[string]int{crawl: limit, mail: 0}

	// Claims of nothing, and one without an instance, change nothing.
	for _, cs := range []store.Claim{
		{Instance: "inst-x", Kinds: kinds},
		{Instance: "inst-x", Max: perClaim},
		{Instance: "inst-x", Kinds: map[string]int{"unknown/v1": 0}, Max: perClaim},
	} {
		if got, err := cl.ClaimTasks(t.Context(), cs); err != nil || len(got) != 0 {
			t.Fatalf("ClaimTasks(%+v) = %v, %v; want none", cs, idsOf(got), err)
		}
	}
	if _, err := cl.ClaimTasks(t.Context(), store.Claim{Kinds: kinds, Max: perClaim, At: at(40)}); !errors.Is(err, store.ErrInvalidAction) {
		t.Fatalf("ClaimTasks without an instance = %v, want ErrInvalidAction", err)
	}
	if w := waitingIDs(t, s, 20); len(w) != 11 {
		t.Fatalf("after claims of nothing, %d records wait (%v), want 11", len(w), w)
	}

	// Four instances claim at once.
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		claims = make([][]bgtype.TaskMeta, instances)
		errs   = make([]error, instances)
	)
	inst := func(i int) string { return fmt.Sprintf("inst-%d", i) }
	for i := range instances {
		wg.Go(func() {
			<-start
			claims[i], errs[i] = cl.ClaimTasks(t.Context(), store.Claim{Instance: inst(i), Kinds: kinds, Max: perClaim, At: at(50 + i)})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent ClaimTasks: %v", err)
	}
	claimedBy := map[string]int{}
	perKind := map[string]int{}
	for i, got := range claims {
		if len(got) > perClaim {
			t.Fatalf("%s claimed %d records (%v), more than Max %d", inst(i), len(got), idsOf(got), perClaim)
		}
		if !slices.IsSortedFunc(got, byAge) {
			t.Errorf("%s's claims not oldest first: %v", inst(i), idsOf(got))
		}
		for _, m := range got {
			if j, dup := claimedBy[m.ID]; dup {
				t.Fatalf("%s claimed by %s and %s", m.ID, inst(j), inst(i))
			}
			claimedBy[m.ID] = i
			perKind[m.Resume.Kind]++
			stored := get(t, s, m.ID)
			if d := diffMeta(stored, m); d != "" {
				t.Errorf("%s as returned differs from the stored record:\n%s", m.ID, d)
			}
			if stored.Status != bgtype.StatusRunning || stored.Instance != inst(i) || stored.Attempt != 1 ||
				stored.Resume == nil || !stored.Resume.ResumedAt.Equal(at(50+i)) || string(stored.Resume.Spec) != `{"n":1}` {
				t.Errorf("%s claimed by %s: %s on %q, attempt %d, resume %+v", m.ID, inst(i), stored.Status, stored.Instance, stored.Attempt, stored.Resume)
			}
		}
	}
	if perKind[crawl] != limit || perKind[mail] != len(mails) || len(perKind) != 2 {
		t.Fatalf("claimed per kind %v, want %s %d (its limit) and %s %d (all)", perKind, crawl, limit, mail, len(mails))
	}
	// The limited kind's claims are its oldest records; the rest wait.
	var wantWaiting []string
	for i, m := range crawls {
		if _, ok := claimedBy[m.ID]; ok != (i < limit) {
			t.Fatalf("%s claimed %v; want the %d oldest of %s claimed", m.ID, ok, limit, crawl)
		}
		if i >= limit {
			wantWaiting = append(wantWaiting, m.ID)
		}
	}
	for _, m := range untouched {
		if d := diffMeta(m, get(t, s, m.ID)); d != "" {
			t.Errorf("%s changed by the claims:\n%s", m.ID, d)
		}
	}
	if got := waitingIDs(t, s, 20); !slices.Equal(got, append([]string{"task_other"}, wantWaiting...)) {
		t.Fatalf("waiting after the claims %v, want task_other and %v", got, wantWaiting)
	}

	// At the limit nothing more is claimed; an ended claim frees one slot.
	next := store.Claim{Instance: "inst-late", Kinds: kinds, Max: perClaim, At: at(60)}
	if got, err := cl.ClaimTasks(t.Context(), next); err != nil || len(got) != 0 {
		t.Fatalf("a claim at the limit = %v, %v; want none", idsOf(got), err)
	}
	done := get(t, s, crawls[0].ID)
	commit(t, s, "alice", store.UpsertAction(ended(done, bgtype.StatusCompleted, 61)))
	got, err := cl.ClaimTasks(t.Context(), next)
	if err != nil || !slices.Equal(idsOf(got), []string{crawls[limit].ID}) {
		t.Fatalf("a claim after one ended = %v, %v; want [%s]", idsOf(got), err, crawls[limit].ID)
	}
	// Max bounds a kind without a limit: the oldest first.
	for i := range 3 {
		waiting(fmt.Sprintf("task_n%02d", i), "carol", mail, 20+i)
	}
	got, err = cl.ClaimTasks(t.Context(), store.Claim{Instance: "inst-late", Kinds: map[string]int{mail: 0}, Max: 2, At: at(62)})
	if err != nil || !slices.Equal(idsOf(got), []string{"task_n00", "task_n01"}) {
		t.Fatalf("a claim of Max 2 = %v, %v; want [task_n00 task_n01]", idsOf(got), err)
	}
}

// byAge orders records as store.SortMetas does.
func byAge(a, b bgtype.TaskMeta) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
}

// waitingIDs lists the ids of the waiting records, oldest first, through
// the store's KindQueue.
func waitingIDs(t *testing.T, s store.Store, limit int) []string {
	t.Helper()
	w, err := s.(store.KindQueue).WaitingTasks(t.Context(), limit)
	if err != nil {
		t.Fatalf("WaitingTasks: %v", err)
	}
	return idsOf(w)
}
