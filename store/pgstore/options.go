package pgstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultGrace             = 30 * time.Second
	DefaultPollInterval      = 2 * time.Second
)

// ErrInvalidOption is returned by Open for an option value it cannot use.
var ErrInvalidOption = errors.New("pgstore: invalid option")

// Option configures a Store. Options are applied by Open in order.
type Option func(*config)

type config struct {
	heartbeat      time.Duration
	grace          time.Duration
	poll           time.Duration
	logger         *slog.Logger
	retainPerOwner int
	retainFor      time.Duration
	backoffMin     time.Duration
	backoffMax     time.Duration
	deaf           bool // the listener LISTENs to nothing (benchmarks: the poll alone)
	loneAlone      bool // a lone commit takes no late arrivals (tests of groups: decision 801)

	relisten  func()          // tests: called before the listener reconnects
	afterPoll func(id string) // tests: called after each poll pass of instance id
}

func defaults() config {
	return config{
		heartbeat:      DefaultHeartbeatInterval,
		grace:          DefaultGrace,
		poll:           DefaultPollInterval,
		logger:         slog.New(slog.DiscardHandler),
		retainPerOwner: defaultRetainPerOwner,
		retainFor:      defaultRetainFor,
		backoffMin:     100 * time.Millisecond,
		backoffMax:     5 * time.Second,
	}
}

func (c *config) check() error {
	switch {
	case c.heartbeat <= 0:
		return fmt.Errorf("%w: heartbeat interval %v, want > 0", ErrInvalidOption, c.heartbeat)
	case c.grace < 2*c.heartbeat:
		return fmt.Errorf("%w: grace %v is less than two heartbeat intervals (%v)", ErrInvalidOption, c.grace, 2*c.heartbeat)
	case c.poll <= 0:
		return fmt.Errorf("%w: poll interval %v, want > 0", ErrInvalidOption, c.poll)
	case c.backoffMin <= 0 || c.backoffMax < c.backoffMin:
		return fmt.Errorf("%w: reconnect backoff %v..%v", ErrInvalidOption, c.backoffMin, c.backoffMax)
	}
	return nil
}

// WithHeartbeatInterval sets how often a started instance stamps its
// heartbeat with the database clock, and how often its reaper looks for
// instances whose heartbeat is older than the grace period. Default
// DefaultHeartbeatInterval (5s).
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithGrace sets how old an instance's last heartbeat may be, by the
// database clock, before any instance's reaper declares it dead and
// interrupts its tasks. It must be at least two heartbeat intervals; pick
// it longer than the longest pause you expect (GC, network blip, database
// failover). An instance that could not heartbeat for this long stops
// writing and cancels its own tasks. Default DefaultGrace (30s).
func WithGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithPollInterval sets how often a started instance reads the cancel
// requests addressed to it, in addition to LISTEN/NOTIFY, so a request sent
// while the listening connection was down is still handled; while that
// connection is down it also reads, as often, what settled meanwhile
// (OnSettled: the wake of an idle Receiver). Default DefaultPollInterval
// (2s).
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.poll = d } }

// WithReconnectBackoff sets how long the listening connection waits before
// reconnecting after it dropped: min at first, doubling up to max. Default
// 100ms up to 5s.
func WithReconnectBackoff(min, max time.Duration) Option {
	return func(c *config) { c.backoffMin, c.backoffMax = min, max }
}

// WithLogger sets the logger for background failures (heartbeat, reaper,
// listener). Default: discard. A nil logger keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithRetainPerOwner keeps at most n terminal records per owner; the first
// committed terminal go first. n <= 0 keeps none. Defaults to
// 1,000, as the in-memory store.
func WithRetainPerOwner(n int) Option { return func(c *config) { c.retainPerOwner = max(n, 0) } }

// WithRetainFor deletes terminal records committed terminal longer ago
// than d by the database clock, and delivered notices and handled cancel
// requests older than d. It is checked by each reaper pass and after
// commits that record a terminal status: at most once a second a Store,
// such a commit starts a pass of the Store's own (it does not wait for
// it) that deletes at most 100 records in a transaction of its own; the
// reaper takes the rest. d <= 0 disables the age limit. Defaults to 24
// hours, as the in-memory store.
func WithRetainFor(d time.Duration) Option { return func(c *config) { c.retainFor = d } }

// The default retention, the in-memory store's.
const (
	defaultRetainPerOwner = 1000
	defaultRetainFor      = 24 * time.Hour
)
