package sqlitestore

import (
	"context"
	"time"

	"github.com/bgtask/bgtask/store"
)

// WithClock replaces the store's clock (age retention).
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// WithHookTaken makes the writer call f with each batch's size once it has
// taken the batch and before it writes it; f may block to hold the writer.
func WithHookTaken(f func(n int)) Option {
	return func(c *config) { c.hookTaken = f }
}

// MigrationSQL is the statement that moves the schema from version v-1 to v.
func MigrationSQL(v int) string { return migrations[v-1] }

// WriterReads is how many read statements the writer has run.
func WriterReads(s *Store) int64 { return s.reads.Load() }

// HandleCancels runs one poll of a started Store's cancel requests, with rt.
func HandleCancels(ctx context.Context, s *Store, rt store.Runtime) error {
	return s.handleCancels(ctx, rt)
}
