package memstore

import "github.com/bgtask/bgtask/bgtype"

// Entry is one record of an in-memory store and its places in the store's
// intrusive lists: linking and unlinking allocate nothing and cost O(1),
// and a forgotten record is unlinked from everything at once, so nothing
// keeps it reachable. Live and terminal records alike are compact: the
// entry holds its memRec (one allocation of 160 bytes, a size class, see
// memrec.go). A live record is the one its
// Task reads (the Manager makes it at spawn, newTaskRecord); when it turns
// terminal the store keeps a copy in an entry of its own, which retention
// recycles, and the Task keeps the live one.
type Entry struct {
	Rec   Rec      // the record
	store memLinks // in its shard's done list while terminal
	owner memLinks // in its owner's live or done list
}

// newLive returns a new entry holding m (its result and slices shared).
func newLive(m *bgtype.TaskMeta) *Entry {
	e := new(Entry)
	e.Rec.Set(m)
	return e
}

func (e *Entry) id() string      { return e.Rec.ID }
func (e *Entry) ownerID() string { return e.Rec.Owner }
func (e *Entry) Key() string     { return e.Rec.Key() }

func (e *Entry) parentID() string {
	if e.Rec.ident == nil {
		return ""
	}
	return e.Rec.ident.parent.TaskID
}

// terminal reports whether e is a terminal record: in the store, a live
// record that turns terminal is replaced at once by a copy.
func (e *Entry) terminal() bool { return e.Rec.IsTerminal() }

// get returns a copy of the record that shares nothing with the store.
func (e *Entry) get() bgtype.TaskMeta { return (e.Rec.Expand()).Clone() }

type memLinks struct{ prev, next *Entry }

func storeLinks(e *Entry) *memLinks { return &e.store }
func ownLinks(e *Entry) *memLinks   { return &e.owner }

// memList is a doubly linked list of entries, oldest first, through one of
// their two link pairs. The zero value is an empty list.
type memList struct {
	head, tail *Entry
	n          int
}

func (l *memList) pushBack(e *Entry, links func(*Entry) *memLinks) {
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

func (l *memList) remove(e *Entry, links func(*Entry) *memLinks) {
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
