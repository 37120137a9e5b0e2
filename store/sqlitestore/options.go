package sqlitestore

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	// DefaultMaxBatch is how many Commit calls one write transaction takes
	// at most.
	DefaultMaxBatch = 256
	// DefaultBusyTimeout is how long a statement waits for a lock held by
	// another connection (another process) before failing with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultPollInterval is how often a started Store reads the cancel
	// requests that other processes wrote.
	DefaultPollInterval = 500 * time.Millisecond
)

// Option configures Open. Open applies the options in order (a later one
// wins) and then checks the result once: an invalid value makes Open fail
// with an error that names the option.
type Option func(*config)

type config struct {
	retainPerOwner int
	retainFor      time.Duration
	logger         *slog.Logger
	maxBatch       int
	batchDelay     time.Duration
	busyTimeout    time.Duration
	fullSync       bool
	poll           time.Duration    // cancel request poll interval (cancelreq.go)
	now            func() time.Time // the store's clock, for age retention; tests replace it
	hookTaken      func(n int)      // tests: called by the writer with each batch's size before writing it
	noRecover      bool             // WithoutRecovery
}

func defaultConfig() config {
	return config{
		retainPerOwner: defaultRetainPerOwner,
		retainFor:      defaultRetainFor,
		logger:         slog.New(slog.DiscardHandler),
		maxBatch:       DefaultMaxBatch,
		busyTimeout:    DefaultBusyTimeout,
		poll:           DefaultPollInterval,
		now:            time.Now,
	}
}

// WithRetainPerOwner keeps at most n terminal records per owner: the
// transaction that takes an owner over n deletes its oldest terminal
// records (the first to have been committed terminal). n <= 0 keeps none. Live records are never
// deleted. Defaults to 1,000, as the in-memory store.
func WithRetainPerOwner(n int) Option {
	return func(c *config) { c.retainPerOwner = max(n, 0) }
}

// WithRetainFor deletes terminal records committed terminal longer ago than
// d, by the store's clock (a record's own finish time may be missing or come
// from another clock). The age is checked by every write transaction that
// records a terminal status. d <= 0 disables the age limit. Defaults to 24
// hours, as the in-memory store.
func WithRetainFor(d time.Duration) Option {
	return func(c *config) { c.retainFor = d }
}

// WithLogger sets the logger for migrations and failed write transactions.
// Default: discard (the store is silent). nil keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithMaxBatch bounds how many concurrent Commit calls the writer merges
// into one transaction. n must be at least 1; 1 disables batching. Default
// DefaultMaxBatch.
func WithMaxBatch(n int) Option {
	return func(c *config) { c.maxBatch = n }
}

// WithBatchDelay makes the writer wait up to d for more Commit calls before
// it writes a batch that is not full, trading that much latency for fewer
// transactions. Default 0: the writer takes what has queued while the
// previous transaction ran, which already merges a burst. d must not be
// negative.
func WithBatchDelay(d time.Duration) Option {
	return func(c *config) { c.batchDelay = d }
}

// WithBusyTimeout sets SQLite's busy_timeout: how long a statement waits
// for a lock that another process holds. Default DefaultBusyTimeout. d must
// not be negative; it is rounded down to milliseconds.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) { c.busyTimeout = d }
}

// WithFullSync sets synchronous=FULL: every transaction is fsynced to the
// write-ahead log before Commit returns, so it survives a power loss or an
// operating-system crash, not only the process's. The default,
// synchronous=NORMAL, survives the process being killed at any point and
// never corrupts the database, but the last transactions before a power
// loss may be lost; a restored task would then be missing, not wrong.
func WithFullSync() Option {
	return func(c *config) { c.fullSync = true }
}

// check reports the first invalid option value, once all are applied.
func (c *config) check() error {
	switch {
	case c.maxBatch < 1:
		return fmt.Errorf("sqlitestore: WithMaxBatch(%d): want at least 1", c.maxBatch)
	case c.batchDelay < 0:
		return fmt.Errorf("sqlitestore: WithBatchDelay(%v): negative", c.batchDelay)
	case c.busyTimeout < 0:
		return fmt.Errorf("sqlitestore: WithBusyTimeout(%v): negative", c.busyTimeout)
	case c.poll <= 0:
		return fmt.Errorf("sqlitestore: WithPollInterval(%v): want > 0", c.poll)
	}
	return nil
}

// WithoutRecovery makes Open leave the records a gone process left queued
// or running as they are (by default, a Store that finds itself the only
// one with the database open interrupts them: see Store.InterruptOrphaned). Restore
// and an explicit InterruptOrphaned still end them.
func WithoutRecovery() Option { return func(c *config) { c.noRecover = true } }

// The default retention, the in-memory store's.
const (
	defaultRetainPerOwner = 1000
	defaultRetainFor      = 24 * time.Hour
)
