package bgtask

import (
	"cmp"
	"slices"
)

// memState is what a MemoryStore holds, read with every shard locked: its
// terminal records in the order retention forgets them (by seq), every id
// and every owner it keeps bookkeeping for.
type memState struct {
	terminal []*memEntry
	ids      []string
	owners   map[string]bool
}

func (s *MemoryStore) state() memState {
	st := memState{owners: map[string]bool{}}
	s.lockAll()
	defer s.unlockAll()
	for i := range s.shards {
		sh := &s.shards[i]
		for e := sh.done.head; e != nil; e = e.store.next {
			st.terminal = append(st.terminal, e)
		}
		for id := range sh.byID {
			st.ids = append(st.ids, id)
		}
		for o := range sh.owners {
			st.owners[o] = true
		}
	}
	slices.SortFunc(st.terminal, func(a, b *memEntry) int { return cmp.Compare(a.rec.seq, b.rec.seq) })
	slices.Sort(st.ids)
	return st
}
