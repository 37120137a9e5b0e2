package memstore

import "sync"

// memTerm is the in-memory store's index of terminal records, whatever their
// shard: each owner's, and all of them, in the order they were committed
// terminal. Retention runs here, exactly, under one lock that a commit
// takes once, only when it ends a task (or may age records out), and only
// inside the lock of the shard it commits to: the lock order is shard
// locks, then memTerm.mu. Retention only unlinks the records it forgets;
// the commit removes them from their shards' maps after it has released
// its own shard locks (in-memory store.forget). A terminal record's content
// changes only under both its shard's lock and this one, so the index's
// readers (Store.each) read it under this lock alone.
type memTerm struct {
	mu     sync.Mutex          // guards the fields below
	owners map[string]*memList // each owner's terminal records (ownLinks)
	all    memList             // every terminal record (storeLinks)

	// pool keeps the compact entries (memEntry) that retention forgot, cleared, for the next records
	// that turn terminal: once the store is at its limits, every ended
	// task forgets one record and reuses its memory, so keeping records
	// compact costs no allocation. The GC empties it within two cycles.
	pool sync.Pool
}

// settle puts the records tx made terminal at the end of the lists, then
// applies retention: it forgets the terminal records beyond the count
// limit of each owner that ended one, then, across all owners, those
// beyond the age limit and the total limit, oldest first. Called with the
// shard locks of the commit held; a commit that neither ended a task nor
// read the clock has nothing to do here.
func (s *Store) settle(tx *memTx) {
	if tx.ended.n == 0 && tx.clock.IsZero() {
		return
	}
	t := &s.term
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range tx.ended.n {
		e := tx.ended.at(i)
		owner := e.Rec.Owner
		l := t.owners[owner]
		if l == nil {
			l = new(memList)
			t.owners[owner] = l
		}
		l.pushBack(e, ownLinks)
		t.all.pushBack(e, storeLinks)
		for l.n > s.retainPerOwner {
			t.unlink(tx, owner, l, l.head)
		}
	}
	tx.ended = memEntries{}
	var cutoff int64
	if s.retainFor > 0 && !tx.clock.IsZero() {
		cutoff = tx.clock.Add(-s.retainFor).UnixNano()
	}
	for e := t.all.head; e != nil && (t.all.n > s.retainTotal || e.Rec.at < cutoff); e = t.all.head {
		owner := e.Rec.Owner
		t.unlink(tx, owner, t.owners[owner], e)
	}
}

// unlink takes e, one of owner's terminal records (on list l), off the
// index and notes it in tx, so the commit forgets it in its shard.
func (t *memTerm) unlink(tx *memTx, owner string, l *memList, e *Entry) {
	t.remove(owner, l, e)
	tx.forgot.add(e)
}

// remove takes e, one of owner's terminal records (on list l), off the
// index. Called with t.mu held.
func (t *memTerm) remove(owner string, l *memList, e *Entry) {
	l.remove(e, ownLinks)
	t.all.remove(e, storeLinks)
	if l.n == 0 {
		delete(t.owners, owner)
	}
}

// forget removes the records retention took off the terminal index from
// their shards. Called with no shard locked.
func (s *Store) forget(tx *memTx) {
	for i := range tx.forgot.n {
		e := tx.forgot.at(i)
		sh := s.shardOf(e.id())
		sh.mu.Lock()
		sh.forget(e)
		sh.mu.Unlock()
		s.term.recycle(e) // off every list and map: nothing reaches it any more
	}
}
