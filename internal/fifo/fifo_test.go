package fifo

import (
	"slices"
	"testing"
)

// TestQueueOrder: items come out in the order they went in, through any
// mix of pushes and pops, and Len, Front and All agree with a plain slice
// model at every step.
func TestQueueOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  string // p: push the next number, o: pop
	}{
		{"push then pop", "pppooo"},
		{"alternate", "popopopo"},
		{"refill after empty", "ppoopppooo"},
		{"wraps to the front", "pppppppppoooooooppppppppppoooo"},
		{"long", "pppppppppppppppppppppppppppppppppoooooooooooooooooooooooopppppppppppppppppppppppoooo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[int]
			var model []int
			next := 0
			for i, op := range tc.ops {
				switch op {
				case 'p':
					q.Push(next)
					model = append(model, next)
					next++
				case 'o':
					if got, want := q.Front(), model[0]; got != want {
						t.Fatalf("op %d: Front = %d, want %d", i, got, want)
					}
					if got, want := q.Pop(), model[0]; got != want {
						t.Fatalf("op %d: Pop = %d, want %d", i, got, want)
					}
					model = model[1:]
				}
				if q.Len() != len(model) || !slices.Equal(q.All(), model) {
					t.Fatalf("op %d: Len %d All %v, want %d %v", i, q.Len(), q.All(), len(model), model)
				}
			}
		})
	}
}

// TestQueueFilter keeps the items the function accepts, in their order,
// and clears the slots it no longer uses.
func TestQueueFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		pops int
		keep string
		want []string
	}{
		{"keep some", []string{"a", "b", "a", "c"}, 0, "a", []string{"a", "a"}},
		{"after pops", []string{"a", "b", "a", "c", "a"}, 2, "a", []string{"a", "a"}},
		{"none", []string{"a", "b"}, 0, "z", []string{}},
		{"empty", nil, 0, "a", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[*string]
			for _, s := range tc.in {
				q.Push(&s)
			}
			for range tc.pops {
				q.Pop()
			}
			q.Filter(func(s *string) bool { return *s == tc.keep })
			got := []string{}
			for _, s := range q.All() {
				got = append(got, *s)
			}
			if !slices.Equal(got, tc.want) || q.Len() != len(tc.want) {
				t.Fatalf("after Filter: %v (Len %d), want %v", got, q.Len(), tc.want)
			}
			for i, p := range q.items[len(q.items):cap(q.items)] {
				if p != nil {
					t.Fatalf("slot %d past the kept items still holds %q", len(q.items)+i, *p)
				}
			}
		})
	}
}

// TestQueuePopClears: a popped item is no longer referenced by the
// queue's array, so the garbage collector can free it.
func TestQueuePopClears(t *testing.T) {
	t.Parallel()
	var q Queue[*int]
	for i := range 4 {
		q.Push(&i)
	}
	q.Pop()
	q.Pop()
	for i, p := range q.items[:q.head] {
		if p != nil {
			t.Fatalf("slot %d holds a popped item", i)
		}
	}
}

// TestQueueReusesItsArray: once at its working size, a queue that is
// pushed and popped in turn allocates nothing.
func TestQueueReusesItsArray(t *testing.T) {
	var q Queue[int]
	for i := range 64 {
		q.Push(i)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for range 8 {
			q.Push(q.Pop())
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round at the working size, want 0", allocs)
	}
	if q.Len() != 64 {
		t.Fatalf("Len %d, want 64", q.Len())
	}
}
