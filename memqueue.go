package bgtask

import "github.com/bgtask/bgtask/bgtype"

// memEntry is one record of a MemoryStore and its places in the store's
// intrusive lists: linking and unlinking allocate nothing and cost O(1),
// and a forgotten record is unlinked from everything at once, so nothing
// keeps it reachable. Live and terminal records alike are compact: the
// entry holds its memRec (one allocation of 160 bytes, a size class, see
// memrec.go). A live record is the one its
// Task reads (the Manager makes it at spawn, newRecord); when it turns
// terminal the store keeps a copy in an entry of its own, which retention
// recycles, and the Task keeps the live one.
type memEntry struct {
	rec   memRec   // the record
	store memLinks // in its shard's done list while terminal
	owner memLinks // in its owner's live or done list
}

// newLive returns a new entry holding m (its result and slices shared).
func newLive(m *bgtype.TaskMeta) *memEntry {
	e := new(memEntry)
	e.rec.set(m)
	return e
}

func (e *memEntry) id() string      { return e.rec.id }
func (e *memEntry) ownerID() string { return e.rec.owner }
func (e *memEntry) key() string     { return e.rec.key() }

func (e *memEntry) parentID() string {
	if e.rec.ident == nil {
		return ""
	}
	return e.rec.ident.parent.TaskID
}

// terminal reports whether e is a terminal record: in the store, a live
// record that turns terminal is replaced at once by a copy.
func (e *memEntry) terminal() bool { return e.rec.isTerminal() }

// get returns a copy of the record that shares nothing with the store.
func (e *memEntry) get() bgtype.TaskMeta { return (e.rec.expand()).Clone() }

type memLinks struct{ prev, next *memEntry }

func storeLinks(e *memEntry) *memLinks { return &e.store }
func ownLinks(e *memEntry) *memLinks   { return &e.owner }

// memList is a doubly linked list of entries, oldest first, through one of
// their two link pairs. The zero value is an empty list.
type memList struct {
	head, tail *memEntry
	n          int
}

func (l *memList) pushBack(e *memEntry, links func(*memEntry) *memLinks) {
	lk := links(e)
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		links(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

func (l *memList) remove(e *memEntry, links func(*memEntry) *memLinks) {
	lk := links(e)
	if lk.prev != nil {
		links(lk.prev).next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		links(lk.next).prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
	l.n--
}
