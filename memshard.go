package bgtask

import (
	"sync"
	"time"
)

// memShards is how many shards a MemoryStore spreads its records over.
const memShards = 16

// memShard is the part of a MemoryStore that holds the records whose id
// hashes to it, under its own lock: the records by id, by owner and by
// idempotency key, and its terminal records in the order they were
// committed terminal. A terminal record's seq, drawn from the store's
// counter while the shard is locked, orders the shards' terminal lists
// against each other.
type memShard struct {
	mu     sync.RWMutex // guards the fields below
	owners map[string]*memOwner
	byID   map[string]*memEntry
	done   memList              // the shard's terminal records, oldest first (storeLinks)
	keys   map[keyRef]*memEntry // records by owner and idempotency key
	_      [64]byte             // keeps the next shard's lock off this cache line
}

func (sh *memShard) init() {
	sh.owners = make(map[string]*memOwner)
	sh.byID = make(map[string]*memEntry)
	sh.keys = make(map[keyRef]*memEntry)
}

// memTx is what one commit carries from its actions to retention.
type memTx struct {
	clock time.Time // the time of the commit, read once when a record turns terminal
	ended bool      // a record turned terminal (or a terminal one was added)
}

// shardOf returns the shard of the record with id (FNV-1a of the id).
func (s *MemoryStore) shardOf(id string) *memShard {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return &s.shards[h%memShards]
}

// lockAll locks every shard, in index order: the order of the shard locks
// wherever more than one is held.
func (s *MemoryStore) lockAll() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
}

func (s *MemoryStore) unlockAll() {
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
}

// upsert is the hot path: one record, changed in place. A new record is own
// when given, else a copy of u. at is the action's commit time.
func (sh *memShard) upsert(s *MemoryStore, tx *memTx, u *TaskMeta, own *memEntry, at time.Time) {
	e := sh.byID[u.ID]
	if e == nil {
		if u.Status == "" {
			return // an update without a status has nothing to enrich
		}
		if own == nil {
			own = newLive(cloneMeta(*u))
		}
		settleNew(own.meta, at)
		sh.add(s, tx, own)
		return
	}
	if e.ownerID() != u.Owner {
		return // another owner's id is never moved
	}
	if e.terminal() {
		e.rec.enrich(u, at)
		return
	}
	if mergeUpsert(e.meta, u, at) && e.meta.Status.IsTerminal() {
		o := sh.owners[u.Owner]
		o.live.remove(e, ownLinks)
		sh.markTerminal(s, tx, o, e)
	}
}

// add keeps e, a live record new to the store, in the shard (compact, if
// it is terminal).
func (sh *memShard) add(s *MemoryStore, tx *memTx, e *memEntry) {
	id, owner := e.meta.ID, e.meta.Owner
	o := sh.owners[owner]
	if o == nil {
		o = new(memOwner)
		sh.owners[owner] = o
	}
	if e.meta.Status.IsTerminal() {
		sh.markTerminal(s, tx, o, e)
		return
	}
	sh.byID[id] = e
	if k := e.meta.IdempotencyKey; k != "" {
		sh.keys[keyRef{owner, k}] = e
	}
	o.live.pushBack(e, ownLinks)
}

// markTerminal keeps the compact form of live, a record on no list that
// just turned terminal, in its place at the end of the terminal lists. live
// itself is let go: the Task that shares it keeps it while it needs it.
func (sh *memShard) markTerminal(s *MemoryStore, tx *memTx, o *memOwner, live *memEntry) {
	if tx.clock.IsZero() {
		tx.clock = time.Now()
	}
	tx.ended = true
	id := live.meta.ID
	e := newDone(id, live.meta)
	e.rec.at = tx.clock.UnixNano()
	e.rec.seq = s.seq.Add(1)
	s.ndone.Add(1)
	s.noteTerminal(e.rec.at)
	sh.byID[id] = e
	if k := live.meta.IdempotencyKey; k != "" {
		sh.keys[keyRef{live.meta.Owner, k}] = e
	}
	o.done.pushBack(e, ownLinks)
	sh.done.pushBack(e, storeLinks)
}

// drop forgets e, one of the shard's records, and unlinks it from every
// list; an owner left without records in the shard is forgotten too.
func (sh *memShard) drop(s *MemoryStore, e *memEntry) {
	name := e.ownerID()
	o := sh.owners[name]
	if e.terminal() { // a terminal record stays terminal
		o.done.remove(e, ownLinks)
		sh.done.remove(e, storeLinks)
		s.ndone.Add(-1)
	} else {
		o.live.remove(e, ownLinks)
	}
	if o.empty() {
		delete(sh.owners, name)
	}
	delete(sh.byID, e.id())
	if k := e.key(); k != "" && sh.keys[keyRef{name, k}] == e {
		delete(sh.keys, keyRef{name, k})
	}
}
