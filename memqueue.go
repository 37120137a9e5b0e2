package bgtask

// memEntry is one record of a MemoryStore and its places in the store's
// intrusive lists: linking and unlinking allocate nothing and cost O(1),
// and a forgotten record is unlinked from everything at once, so nothing
// keeps it reachable. Record and links are one allocation (464 bytes,
// in the 480-byte size class); the Manager makes it at spawn (newRecord).
type memEntry struct {
	meta  TaskMeta
	at    int64    // Unix nanoseconds of the commit that made it terminal, by the store's clock
	seq   int64    // the store's order of the commits that made records terminal
	store memLinks // in its shard's done list while terminal
	owner memLinks // in its owner's live or done list
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
