package memstore

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/reduce"
)

// memShards is how many shards an in-memory store spreads its records over.
const memShards = 16

// memShard is the part of an in-memory store that holds the records whose id
// hashes to it, under its own lock: the records by id and by idempotency
// key, and each owner's live records. Terminal records are also in the
// store's terminal index (memTerm), which orders them across shards.
type memShard struct {
	mu     sync.RWMutex        // guards the fields below
	owners map[string]*memList // each owner's live records in this shard (ownLinks)
	byID   map[string]*Entry   // live and terminal records
	keys   map[keyRef]*Entry   // records by owner and idempotency key
	spare  *memList            // an owner's emptied live list, reused by the next (no allocation per task)
	idle   *memList            // the live list that emptied last, kept in owners for its owner's next record
	idleOf string              // idle's owner
	term   *memTerm            // the store's terminal index: a terminal record changes under both locks
	_      [64]byte            // keeps the next shard's lock off this cache line
}

func (sh *memShard) init() {
	sh.owners = make(map[string]*memList)
	sh.byID = make(map[string]*Entry)
	sh.keys = make(map[keyRef]*Entry)
}

// memTx is what one commit carries: the records it made terminal, to be
// put in the terminal index before its shard locks are released, and the
// records retention forgot, to be removed from their shards after.
type memTx struct {
	clock  time.Time  // the time of the commit, read once when a record turns terminal
	spare  *Entry     // a compact entry taken before the lock, for the first record the commit makes terminal
	ended  memEntries // records made terminal, in order
	forgot memEntries // records retention took off the terminal index
}

// memEntries is a short list of entries that allocates only past two.
type memEntries struct {
	n    int
	few  [2]*Entry
	more []*Entry
}

func (l *memEntries) add(e *Entry) {
	if l.n < len(l.few) {
		l.few[l.n] = e
	} else {
		l.more = append(l.more, e)
	}
	l.n++
}

func (l *memEntries) at(i int) *Entry {
	if i < len(l.few) {
		return l.few[i]
	}
	return l.more[i-len(l.few)]
}

// shardOf returns the shard of the record with id.
func (s *Store) shardOf(id string) *memShard {
	return &s.shards[maphash.String(s.seed, id)%memShards]
}

// lockAll locks every shard, in index order: the order of the shard locks
// wherever more than one is held.
func (s *Store) lockAll() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
}

func (s *Store) unlockAll() {
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
}

// upsert is the hot path: one record, changed in place. A new record is own
// when given (its identity fields already set, by the caller), else a copy
// of u. at is the action's commit time.
func (sh *memShard) upsert(tx *memTx, u *bgtype.TaskMeta, own *Entry, at time.Time) {
	e := sh.byID[u.ID]
	if e == nil {
		if u.Status == "" {
			return // an update without a status has nothing to enrich
		}
		sh.add(tx, insertLive(u, own, at))
		return
	}
	if e.ownerID() != u.Owner {
		return // another owner's id is never moved
	}
	if e.terminal() {
		sh.term.mu.Lock() // readers of the terminal index read it under that lock alone
		e.Rec.merge(u, at)
		sh.term.mu.Unlock()
		return
	}
	if e.Rec.merge(u, at) && e.Rec.IsTerminal() {
		sh.endLive(tx, e)
	}
}

// endLive moves e, a live record of the shard that just turned terminal,
// off its owner's live list and into the terminal index.
func (sh *memShard) endLive(tx *memTx, e *Entry) {
	owner := e.Rec.Owner
	sh.unlinkLive(owner, sh.owners[owner], e)
	sh.markTerminal(tx, e)
}

// insertLive returns the entry of u, a record new to the store, settled
// (settleNew): own when given, whose identity fields the caller set and a
// Task may be reading, else a new entry holding a copy of u. Out of line:
// its frame holds a TaskMeta, and upsert runs at the deep end of a task's
// goroutine (docs/internals.md).
//
//go:noinline
func insertLive(u *bgtype.TaskMeta, own *Entry, at time.Time) *Entry {
	m := *u
	reduce.SettleNew(&m, at)
	if own == nil {
		m = m.Clone()
		return newLive(&m)
	}
	own.Rec.SetMutable(&m)
	return own
}

// add keeps e, a live record new to the store, in the shard (compact, if
// it is terminal).
func (sh *memShard) add(tx *memTx, e *Entry) {
	if e.terminal() {
		sh.markTerminal(tx, e)
		return
	}
	id, owner := e.Rec.ID, e.Rec.Owner
	sh.byID[id] = e // a new id: no entry is named here (callers look first)
	e.Rec.held = true
	if k := e.Key(); k != "" {
		sh.keys[keyRef{owner, k}] = e
	}
	l := sh.owners[owner]
	if l == nil {
		if l = sh.spare; l != nil {
			sh.spare = nil
		} else {
			l = new(memList)
		}
		sh.owners[owner] = l
	}
	l.pushBack(e, ownLinks)
}

// unlinkLive takes e off owner's live list l in the shard. A list that
// empties stays in owners, for its owner's next record (an owner's tasks
// often run one after another: no map delete and insert per task), until
// another owner's list empties: then the one kept before, if still empty,
// is forgotten and becomes the spare. So at most one empty list per shard
// is kept.
func (sh *memShard) unlinkLive(owner string, l *memList, e *Entry) {
	l.remove(e, ownLinks)
	if l.n > 0 || l == sh.idle {
		return
	}
	if old := sh.idle; old != nil && old.n == 0 {
		delete(sh.owners, sh.idleOf)
		sh.spare = old
	}
	sh.idle, sh.idleOf = l, owner
}

// markTerminal keeps a copy of live, a record on no list that just turned
// terminal, in the shard; tx puts it in the terminal index. live itself is
// let go: the Task that shares it keeps it while it needs it.
func (sh *memShard) markTerminal(tx *memTx, live *Entry) {
	if tx.clock.IsZero() {
		tx.clock = time.Now()
	}
	e := newDone(sh.term, tx.spare, &live.Rec)
	tx.spare = nil
	e.Rec.at = tx.clock.UnixNano()
	sh.byID[e.Rec.ID] = e // in live's place, if live was there
	live.Rec.held, e.Rec.held = false, true
	if k := e.Key(); k != "" {
		sh.keys[keyRef{e.Rec.Owner, k}] = e
	}
	tx.ended.add(e)
}

// forget removes e, a record already off every list, from the shard's
// maps, where they still name it (the id may name another record now).
// Called with sh.mu held.
func (sh *memShard) forget(e *Entry) {
	if e.Rec.held { // no lookup: held says byID names e
		delete(sh.byID, e.id())
		e.Rec.held = false
	}
	if k := e.Key(); k != "" {
		if ref := (keyRef{e.ownerID(), k}); sh.keys[ref] == e {
			delete(sh.keys, ref)
		}
	}
}

// keyRef is an owner's idempotency key.
type keyRef struct{ owner, key string }
