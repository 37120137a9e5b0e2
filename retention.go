package bgtask

import (
	"time"

	"github.com/bgtask/bgtask/internal/memstore"
)

// Retention bounds what the default in-memory store keeps of finished
// tasks, so that a long-running process holds a bounded number of records.
// Live records (queued, running, awaiting input) are never dropped; of the
// terminal ones the oldest (by the time they ended) go first, and a
// forgotten record is released at once. The zero value keeps the defaults.
// A durable store (WithStore) has retention options of its own.
type Retention struct {
	// PerOwner is how many terminal records each owner keeps. Defaults to
	// 1,000; a negative value keeps none.
	PerOwner int
	// Total is how many terminal records all owners keep together.
	// Defaults to 100,000; a negative value keeps none.
	Total int
	// For is how long a terminal record is kept after it ended. Defaults
	// to 24 hours; a negative value keeps records whatever their age.
	For time.Duration
}

// WithRetention sets the retention of the default in-memory store. Given
// with WithStore, New fails with an error matching ErrInvalidArgument: that
// store is configured with its own options.
func WithRetention(r Retention) Option {
	return func(c *config) { c.retention = &r }
}

// memoryStore returns the in-memory store configured by r (nil: defaults).
func memoryStore(r *Retention) *memstore.Store {
	if r == nil {
		return memstore.New()
	}
	var opts []memstore.Option
	switch {
	case r.PerOwner < 0:
		opts = append(opts, memstore.WithRetainPerOwner(0))
	case r.PerOwner > 0:
		opts = append(opts, memstore.WithRetainPerOwner(r.PerOwner))
	}
	switch {
	case r.Total < 0:
		opts = append(opts, memstore.WithRetainTotal(0))
	case r.Total > 0:
		opts = append(opts, memstore.WithRetainTotal(r.Total))
	}
	switch {
	case r.For < 0:
		opts = append(opts, memstore.WithRetainFor(0))
	case r.For > 0:
		opts = append(opts, memstore.WithRetainFor(r.For))
	}
	return memstore.New(opts...)
}
