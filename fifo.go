package bgtask

// fifo is a queue that reuses its backing array: popping from the front and
// pushing at the back allocate nothing once it has reached its working size.
type fifo[T any] struct {
	items []T
	head  int
}

func (f *fifo[T]) len() int { return len(f.items) - f.head }

func (f *fifo[T]) push(v T) {
	if len(f.items) == cap(f.items) && f.head > 0 && f.head >= len(f.items)/2 {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	f.items = append(f.items, v)
}

func (f *fifo[T]) front() T { return f.items[f.head] }

func (f *fifo[T]) pop() T {
	var zero T
	v := f.items[f.head]
	f.items[f.head] = zero
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	}
	return v
}

// all returns the queued items, oldest first; valid until the next change.
func (f *fifo[T]) all() []T { return f.items[f.head:] }

// filter empties the queue, keeping only the items for which keep is true.
func (f *fifo[T]) filter(keep func(T) bool) {
	kept := f.items[:0]
	for _, v := range f.items[f.head:] {
		if keep(v) {
			kept = append(kept, v)
		}
	}
	clear(f.items[len(kept):])
	f.items, f.head = kept, 0
}
