package bgtask

import (
	"fmt"
	"log/slog"
	"time"
)

// Option configures a Manager. Options are applied in order by New.
type Option func(*config) error

type config struct {
	store          Store
	logger         *slog.Logger
	observer       func(Transition)
	eventObserver  func(Event)
	instance       string
	maxRunning     int
	maxOwner       int
	queueWhenFull  bool
	maxDepth       int
	maxChildren    int
	commitAttempts int
	commitBackoff  time.Duration
	runMemory      int
	inboxOpts      []InboxOption
	caps           sizeCaps
}

// sizeCaps are the record caps, in bytes (see WithMaxResultBytes and the
// options after it).
type sizeCaps struct {
	result, err, payload, prompt, message int
}

// Defaults for the options below.
const (
	DefaultCommitAttempts    = 3
	DefaultCommitBackoff     = 50 * time.Millisecond
	DefaultCancelledRunsKept = 4096

	// Size caps on what a task hands to its owner, as kept in the record
	// and in events. Something larger is cut, with a marker that says so and
	// gives the original size (see each option).
	DefaultMaxResultBytes  = 64 << 10 // a completed task's JSON result
	DefaultMaxErrorBytes   = 16 << 10 // a failed task's error text, and its panic stack
	DefaultMaxPayloadBytes = 16 << 10 // a custom event's JSON payload (Task.Emit)
	DefaultMaxPromptBytes  = 4 << 10  // an input request's prompt (Task.RequestInput)
	DefaultMaxMessageBytes = 16 << 10 // a Message's Content (and From), either way
)

func defaultConfig() config {
	return config{
		logger:         discardLogger,
		commitAttempts: DefaultCommitAttempts,
		commitBackoff:  DefaultCommitBackoff,
		runMemory:      DefaultCancelledRunsKept,
		caps: sizeCaps{
			result:  DefaultMaxResultBytes,
			err:     DefaultMaxErrorBytes,
			payload: DefaultMaxPayloadBytes,
			prompt:  DefaultMaxPromptBytes,
			message: DefaultMaxMessageBytes,
		},
	}
}

// WithStore sets where task metadata is committed. Default: a new
// NewMemoryStore().
func WithStore(s Store) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("bgtask: WithStore: nil store")
		}
		c.store = s
		return nil
	}
}

// WithLogger sets the logger. Default: discard (the library is silent).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// WithObserver sets a function called after every committed status
// transition, in the goroutine that made it (the spawner, or the task's
// goroutine). It must be fast and must not call back into the Manager in a
// way that waits for the task. A panic in it is recovered and logged.
func WithObserver(f func(Transition)) Option {
	return func(c *config) error { c.observer = f; return nil }
}

// WithEventObserver sets a function called with every custom event a task
// emits (Task.Emit, messages included), whatever the task's wake policy and
// whether or not the event reaches an inbox. It runs in the task's
// goroutine, after the event was kept as the task's progress and before it
// is sent, so one task's events reach it in order; input requests and the
// end of a task are transitions (WithObserver). It is also called with each
// EventCommitFailed: the end of a task whose terminal record could not be
// committed, which no transition reports. It must be fast and must
// not call back into the task. The event's Payload is shared with the
// inbox: read it, never modify it. A panic in it is recovered and logged.
func WithEventObserver(f func(Event)) Option {
	return func(c *config) error { c.eventObserver = f; return nil }
}

// WithInstance names this runtime instance; records carry it so a restart
// can tell its own tasks from those of a process that is gone. Default: a
// new random id per Manager.
func WithInstance(id string) Option {
	return func(c *config) error {
		if id == "" {
			return fmt.Errorf("bgtask: WithInstance: empty id")
		}
		c.instance = id
		return nil
	}
}

// WithMaxConcurrent limits how many tasks run at once across all owners.
// 0, the default, means no limit.
func WithMaxConcurrent(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: WithMaxConcurrent(%d): negative limit", n)
		}
		c.maxRunning = n
		return nil
	}
}

// WithMaxConcurrentPerOwner limits how many tasks of one owner run at once.
// 0, the default, means no limit.
func WithMaxConcurrentPerOwner(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: WithMaxConcurrentPerOwner(%d): negative limit", n)
		}
		c.maxOwner = n
		return nil
	}
}

// WithQueueWhenFull makes a spawn over a concurrency limit wait as queued,
// first in first out, instead of failing with ErrLimit.
func WithQueueWhenFull() Option {
	return func(c *config) error { c.queueWhenFull = true; return nil }
}

// WithMaxDepth limits lineage depth: a task spawned inside a task is at
// depth 1, and so on. A spawn deeper than n fails with ErrDepthLimit.
// 0, the default, means no limit.
func WithMaxDepth(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: WithMaxDepth(%d): negative limit", n)
		}
		c.maxDepth = n
		return nil
	}
}

// WithMaxChildren limits how many live, attached children one task may
// have. A spawn over it fails with ErrFanOutLimit. 0, the default, means no
// limit.
func WithMaxChildren(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: WithMaxChildren(%d): negative limit", n)
		}
		c.maxChildren = n
		return nil
	}
}

// WithCommitRetry sets how many times a task's terminal record is tried
// against the Store, with backoff doubling between tries, before the owner
// gets an EventCommitFailed. Defaults DefaultCommitAttempts and
// DefaultCommitBackoff.
func WithCommitRetry(attempts int, backoff time.Duration) Option {
	return func(c *config) error {
		if attempts < 1 || backoff < 0 {
			return fmt.Errorf("bgtask: WithCommitRetry(%d, %v): need attempts >= 1 and backoff >= 0", attempts, backoff)
		}
		c.commitAttempts, c.commitBackoff = attempts, backoff
		return nil
	}
}

// WithCancelledRunsKept sets how many cancelled run ids without live tasks
// are remembered, so that late spawns into them are still refused. The
// oldest are forgotten first. Default DefaultCancelledRunsKept.
func WithCancelledRunsKept(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: WithCancelledRunsKept(%d): negative count", n)
		}
		c.runMemory = n
		return nil
	}
}

// WithInboxOptions sets the options of the inboxes the Manager makes for
// owners and sub-agents (high-water mark, coalescing, fallback).
func WithInboxOptions(opts ...InboxOption) Option {
	return func(c *config) error { c.inboxOpts = append(c.inboxOpts, opts...); return nil }
}

// WithMaxResultBytes caps a completed task's result, as JSON, in its record
// and its completion event. A larger result is replaced by the JSON object
//
//	{"truncated":true,"original_bytes":N,"preview":"<the start of the result's JSON text>"}
//
// of at most n bytes. Default DefaultMaxResultBytes; 0 means the default, and
// a negative n makes New fail.
func WithMaxResultBytes(n int) Option {
	return withCap("WithMaxResultBytes", n, DefaultMaxResultBytes, func(c *sizeCaps) *int { return &c.result })
}

// WithMaxErrorBytes caps a failed task's error text, and its panic stack, in
// its record and its events. A longer text keeps its start, cut at a rune
// boundary, and ends with "…[truncated: N bytes total]", in at most n bytes.
// Default DefaultMaxErrorBytes; 0 means the default, and a negative n makes
// New fail.
func WithMaxErrorBytes(n int) Option {
	return withCap("WithMaxErrorBytes", n, DefaultMaxErrorBytes, func(c *sizeCaps) *int { return &c.err })
}

// WithMaxPayloadBytes caps a custom event's payload, as JSON (Task.Emit),
// in the event and the task's progress. A larger payload is replaced by a
// JSON object like the one of WithMaxResultBytes, of at most n bytes.
// Messages are capped by WithMaxMessageBytes instead. Default
// DefaultMaxPayloadBytes; 0 means the default, and a negative n makes New
// fail.
func WithMaxPayloadBytes(n int) Option {
	return withCap("WithMaxPayloadBytes", n, DefaultMaxPayloadBytes, func(c *sizeCaps) *int { return &c.payload })
}

// WithMaxPromptBytes caps an input request's prompt (Task.RequestInput) in
// the record and the event, cut like an error text (WithMaxErrorBytes).
// Default DefaultMaxPromptBytes; 0 means the default, and a negative n makes
// New fail.
func WithMaxPromptBytes(n int) Option {
	return withCap("WithMaxPromptBytes", n, DefaultMaxPromptBytes, func(c *sizeCaps) *int { return &c.prompt })
}

// WithMaxMessageBytes caps the Content and the From of a Message, sent to a
// sub-agent (Owner.Send, including an answer to an input request) or by a
// task to its owner (Task.Emit of a Message), each cut like an error text
// (WithMaxErrorBytes). A message payload that is not a Message is capped as
// a payload of WithMaxMessageBytes. Default DefaultMaxMessageBytes; 0 means
// the default, and a negative n makes New fail.
func WithMaxMessageBytes(n int) Option {
	return withCap("WithMaxMessageBytes", n, DefaultMaxMessageBytes, func(c *sizeCaps) *int { return &c.message })
}

// withCap is the shape of the size cap options: negative is refused, 0 is
// the default.
func withCap(name string, n, def int, field func(*sizeCaps) *int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("bgtask: %s(%d): negative size", name, n)
		}
		if n == 0 {
			n = def
		}
		*field(&c.caps) = n
		return nil
	}
}

// SpawnOption configures one spawn.
type SpawnOption func(*spawnConfig)

type spawnConfig struct {
	name, typ, description string
	parent                 Parent
	detached               bool
	wake                   WakePolicy
}

// WithName gives the task a short name, unique among the owner's
// non-terminal tasks, by which tools can address it.
func WithName(name string) SpawnOption { return func(c *spawnConfig) { c.name = name } }

// WithType sets the task type shown to the model. Default "task", or
// "sub_agent" for SpawnAgent.
func WithType(typ string) SpawnOption { return func(c *spawnConfig) { c.typ = typ } }

// WithDescription sets a one-line description shown to the model.
func WithDescription(d string) SpawnOption { return func(c *spawnConfig) { c.description = d } }

// WithParent sets the lineage explicitly. Fields left empty are filled from
// the context (the running task and the tool call).
func WithParent(p Parent) SpawnOption { return func(c *spawnConfig) { c.parent = p } }

// Detached keeps the task out of cascades: cancelling its parent task or its
// run does not cancel it (Temporal's abandon policy). Its lineage is still
// recorded. CancelOwner and Shutdown still cancel it.
func Detached() SpawnOption { return func(c *spawnConfig) { c.detached = true } }
