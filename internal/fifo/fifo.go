package fifo

// Queue is a first-in first-out queue that reuses its backing array:
// popping from the front and pushing at the back allocate nothing once it
// has reached its working size. The zero value is an empty queue ready to
// use. A Queue is not safe for concurrent use: its owner guards it.
type Queue[T any] struct {
	items []T
	head  int
}

// Len returns the number of queued items.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Push adds v at the back. When the backing array is full and its front
// half has been popped, the queued items move to its start instead of the
// array growing.
func (q *Queue[T]) Push(v T) {
	if len(q.items) == cap(q.items) && q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

// Front returns the oldest item without removing it. It panics (index out
// of range) when the queue is empty: check Len first.
func (q *Queue[T]) Front() T { return q.items[q.head] }

// Pop removes and returns the oldest item; the queue keeps no reference to
// it. It panics (index out of range) when the queue is empty: check Len
// first.
func (q *Queue[T]) Pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}

// All returns the queued items, oldest first. The slice shares the
// queue's array: it is valid until the next change, and the caller must
// not modify it.
func (q *Queue[T]) All() []T { return q.items[q.head:] }

// Filter keeps only the items for which keep returns true, in their order;
// the queue keeps no reference to the others. keep must not change the
// queue.
func (q *Queue[T]) Filter(keep func(T) bool) {
	kept := q.items[:0]
	for _, v := range q.items[q.head:] {
		if keep(v) {
			kept = append(kept, v)
		}
	}
	clear(q.items[len(kept):])
	q.items, q.head = kept, 0
}
