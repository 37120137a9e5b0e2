package pgstore

import (
	"slices"

	"github.com/bgtask/bgtask/store"
)

// The lock order of the owners' terminal counts: a statement that changes
// how many terminal records owners have makes the counting triggers
// (decision 170) lock those owners' rows of bgtask_owner_terminal in owner
// order, to the end of the transaction. A group's open transaction
// (opengroup.go) runs two such statements, its group's and then its late
// arrivals'; two Stores whose transactions took owners in different
// orders deadlocked (one a run of the four-instance cluster), and
// PostgreSQL broke each after deadlock_timeout. So a late arrival joins
// only if every count it may change is one the transaction holds or sorts
// after all of them: every transaction then takes the counts in ascending
// order, and none waits for one that waits for it.
//
// The order is the owners' byte order, the same in Go (string comparison)
// and in SQL (the triggers and lockAgedSQL sort by owner COLLATE "C",
// migration 15), not the database's default collation: under en-US "a"
// sorts before "B", in bytes after it, and two transactions that took the
// two counts in the two orders deadlocked (decision 794).

// lockOrder is what a group's transaction holds once its group's
// statements ran: the owners whose counts they may have locked.
type lockOrder struct {
	held map[string]bool
	max  string // the greatest of held
}

// lockOrder returns the counts group's statements may lock.
func (s *Store) lockOrder(group []*commitReq) *lockOrder {
	o := &lockOrder{held: make(map[string]bool)}
	for _, r := range group {
		for _, owner := range s.countOwners(r) {
			o.held[owner] = true
			o.max = max(o.max, owner)
		}
	}
	return o
}

// admits reports whether a commit whose statements may change the
// counts of owners may join the transaction: each is held, or sorts after
// every held one in byte order.
func (o *lockOrder) admits(owners []string) bool {
	for _, owner := range owners {
		if o.held[owner] {
			continue
		}
		if len(o.held) > 0 && owner <= o.max {
			return false
		}
	}
	return true
}

// countOwners returns the owners whose terminal counts r's commit may
// change: none when every action upserts records that are not terminal
// and that this Store does not know as terminal (a spawn, a progress
// update), else r's owner and the owners of the terminal records it
// upserts.
func (s *Store) countOwners(r *commitReq) []string {
	var owners []string
	add := func(owner string) {
		if owner != "" && !slices.Contains(owners, owner) {
			owners = append(owners, owner)
		}
	}
	for _, a := range r.actions {
		if a.Op != store.OpUpsert {
			add(r.owner)
			continue
		}
		for i := range a.Tasks {
			if a.Tasks[i].Status.IsTerminal() {
				add(r.owner)
				add(a.Tasks[i].Owner)
			}
		}
	}
	if len(owners) == 0 {
		s.knownMu.Lock()
		for _, id := range r.ids {
			if k, ok := s.known[id]; ok && k.meta.Status.IsTerminal() {
				add(r.owner)
				add(k.meta.Owner)
			}
		}
		s.knownMu.Unlock()
	}
	return owners
}
