package bytecache

import "sync"

// Cache maps ids to values and holds at most Max bytes of them, as the size
// function counts them; putting past the bound forgets the oldest entries
// first, and a value larger than the bound alone is not kept. Safe for
// concurrent use. The zero value is not usable: use New.
type Cache[V any] struct {
	max  int64
	size func(V) int64

	mu    sync.Mutex // guards the fields below
	byID  map[string]entry[V]
	order []slot // oldest first; a slot whose entry was replaced or deleted is skipped
	bytes int64
	seq   uint64
}

type entry[V any] struct {
	v   V
	n   int64
	seq uint64 // the slot in order that holds this entry
}

type slot struct {
	id  string
	seq uint64
}

// New returns a Cache that holds at most max bytes, each value counted by
// size.
func New[V any](max int64, size func(V) int64) *Cache[V] {
	return &Cache[V]{max: max, size: size, byID: make(map[string]entry[V])}
}

// Put keeps v under id, in place of any value id had, and reports whether it
// was kept (false when v alone is larger than the bound).
func (c *Cache[V]) Put(id string, v V) bool {
	n := c.size(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteLocked(id)
	if n > c.max {
		return false
	}
	for c.bytes+n > c.max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		if e, ok := c.byID[old.id]; ok && e.seq == old.seq {
			c.deleteLocked(old.id)
		}
	}
	c.seq++
	c.byID[id] = entry[V]{v: v, n: n, seq: c.seq}
	c.order = append(c.order, slot{id, c.seq})
	c.bytes += n
	if len(c.order) > 2*len(c.byID)+16 { // forget the slots of replaced and deleted entries
		live := make([]slot, 0, len(c.byID))
		for _, s := range c.order {
			if e, ok := c.byID[s.id]; ok && e.seq == s.seq {
				live = append(live, s)
			}
		}
		c.order = live
	}
	return true
}

// Get returns the value kept under id, if any.
func (c *Cache[V]) Get(id string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	return e.v, ok
}

// Delete forgets the value kept under id, if any.
func (c *Cache[V]) Delete(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteLocked(id)
}

// Len returns how many values are kept, and their bytes.
func (c *Cache[V]) Len() (values int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID), c.bytes
}

func (c *Cache[V]) deleteLocked(id string) {
	if e, ok := c.byID[id]; ok {
		c.bytes -= e.n
		delete(c.byID, id)
	}
}
