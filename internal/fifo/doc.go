// Package fifo is a generic first-in first-out queue over one reused
// slice, for the runtime's bookkeeping queues (an owner's message order,
// the cancelled runs to forget).
//
// Performance: every method is small enough to inline at its call site
// (generic methods inline across packages as within one; check with
// `go build -gcflags=-m`), and a queue at its working size allocates
// nothing: Push moves the live items to the front of a full array whose
// first half was popped, instead of growing it, and Pop clears the slot
// it empties so the garbage collector can free the item.
package fifo
