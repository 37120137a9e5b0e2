package memstore

import (
	"context"
	"iter"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// UndeliveredOwners implements UndeliveredLister: it yields each owner
// that holds a terminal record that is neither announced nor silent, from
// the index of terminal records, in no particular order. The owners are
// collected under the index's lock, then yielded without it.
func (s *Store) UndeliveredOwners(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := ctx.Err(); err != nil {
			yield("", err)
			return
		}
		silent := memWakeCode(bgtype.WakeSilent)
		var owners []string
		s.term.mu.Lock()
		for owner, l := range s.term.owners {
			for e := l.head; e != nil; e = e.owner.next {
				if !e.Rec.announced && e.Rec.wake != silent {
					owners = append(owners, owner)
					break
				}
			}
		}
		s.term.mu.Unlock()
		for _, o := range owners {
			if !yield(o, nil) {
				return
			}
		}
	}
}

var _ store.UndeliveredLister = (*Store)(nil)
