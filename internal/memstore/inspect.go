package memstore

import "slices"

// What the store holds, for the runtime's tests (the store's own tests
// read its fields).

// Contents lists the ids of the terminal records in retention order, every
// record id, and the owners the store knows (sorted).
func (s *Store) Contents() (terminal, all, owners []string) {
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

// Kept returns the record the store keeps for id, nil when none.
func (s *Store) Kept(id string) *Rec {
	sh := s.shardOf(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if e := sh.byID[id]; e != nil {
		return &e.Rec
	}
	return nil
}

// Parts reports whether r has its identity part and its rare part, and
// the identity part itself (shared by copies of one record).
func (r *Rec) Parts() (ident, rare bool, identPart any) {
	return r.ident != nil, r.rare != nil, r.ident
}

// memState is what an in-memory store holds, read with every shard locked: its
// terminal records in the order retention forgets them, every id and
// every owner it keeps bookkeeping for (in a shard or the terminal index).
type memState struct {
	terminal []*Entry
	ids      []string
	owners   map[string]bool
}

func (s *Store) state() memState {
	st := memState{owners: map[string]bool{}}
	s.lockAll()
	defer s.unlockAll()
	s.term.mu.Lock()
	defer s.term.mu.Unlock()
	for e := s.term.all.head; e != nil; e = e.store.next {
		st.terminal = append(st.terminal, e)
	}
	for o := range s.term.owners {
		st.owners[o] = true
	}
	for i := range s.shards {
		sh := &s.shards[i]
		for id := range sh.byID {
			st.ids = append(st.ids, id)
		}
		for o, l := range sh.owners {
			if l.n > 0 { // not the emptied list kept for its owner's next record
				st.owners[o] = true
			}
		}
	}
	slices.Sort(st.ids)
	return st
}
