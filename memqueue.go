package bgtask

// memEntry is one record of a MemoryStore and its places in the store's
// intrusive lists: linking and unlinking allocate nothing and cost O(1),
// and a forgotten record is unlinked from everything at once, so nothing
// keeps it reachable. A live record is whole (memLive: the entry and the
// TaskMeta in one allocation of 472 bytes, in the 480-byte size class; the
// Manager makes it at spawn, newRecord); a terminal one is compact
// (memDone, 192 bytes, see memrec.go).
type memEntry struct {
	meta  *TaskMeta // a live record: the whole of it; nil once terminal
	rec   *memRec   // a terminal record, compact; nil while live
	store memLinks  // in its shard's done list while terminal
	owner memLinks  // in its owner's live or done list
}

// memLive is a live record and its entry, in one allocation.
type memLive struct {
	e    memEntry
	meta TaskMeta
}

func newLive(m TaskMeta) *memEntry {
	l := &memLive{meta: m}
	l.e.meta = &l.meta
	return &l.e
}

func (e *memEntry) id() string {
	if e.meta != nil {
		return e.meta.ID
	}
	return e.rec.id
}

func (e *memEntry) ownerID() string {
	if e.meta != nil {
		return e.meta.Owner
	}
	return e.rec.owner
}

func (e *memEntry) key() string {
	if e.meta != nil {
		return e.meta.IdempotencyKey
	}
	return e.rec.key()
}

func (e *memEntry) parentID() string {
	if e.meta != nil {
		return e.meta.Parent.TaskID
	}
	if e.rec.rare == nil {
		return ""
	}
	return e.rec.rare.parent.TaskID
}

func (e *memEntry) terminal() bool { return e.rec != nil }

// get returns a copy of the record that shares nothing with the store.
func (e *memEntry) get() TaskMeta {
	if e.meta != nil {
		return cloneMeta(*e.meta)
	}
	return cloneMeta(e.rec.expand())
}

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
