package bgtask

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Option configures a Manager. New applies the options in order (a later
// one wins) and then checks the result once: an invalid value makes New fail
// with an error naming the option.
//
// Every option type of this package has this shape: a function that sets
// a field, named With..., checked by the constructor that takes it.
type Option func(*config)

type config struct {
	store          store.Store
	retention      *Retention // the in-memory store's (WithRetention)
	logger         *slog.Logger
	observer       func(Transition)
	eventObserver  func(bgtype.Event)
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
	tagCount       int // WithTagCaps
	tagBytes       int
	// WithProgressInterval
	progressInterval time.Duration
	onPendingOwner   func(owner string) // WithOnPendingOwner

	// Set by an option, to tell an explicit bad value from the default.
	storeSet, instanceSet bool
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
		logger:           discardLogger,
		commitAttempts:   DefaultCommitAttempts,
		commitBackoff:    DefaultCommitBackoff,
		runMemory:        DefaultCancelledRunsKept,
		progressInterval: DefaultProgressInterval,
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
// in-memory store (see WithRetention), one per Manager.
func WithStore(s store.Store) Option {
	return func(c *config) { c.store, c.storeSet = s, true }
}

// WithLogger sets the logger. Default: discard (the library is silent).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithObserver sets a function called after every committed status
// transition, in the goroutine that made it (the spawner, or the task's
// goroutine). It must be fast and must not call back into the Manager in a
// way that waits for the task. A panic in it is recovered and logged.
func WithObserver(f func(Transition)) Option {
	return func(c *config) { c.observer = f }
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
func WithEventObserver(f func(bgtype.Event)) Option {
	return func(c *config) { c.eventObserver = f }
}

// WithInstance names this runtime instance; records carry it so a restart
// can tell its own tasks from those of a process that is gone. Default: a
// new random id per Manager.
func WithInstance(id string) Option {
	return func(c *config) { c.instance, c.instanceSet = id, true }
}

// WithMaxConcurrent limits how many tasks run at once across all owners.
// 0, the default, means no limit.
func WithMaxConcurrent(n int) Option {
	return func(c *config) { c.maxRunning = n }
}

// WithMaxConcurrentPerOwner limits how many tasks of one owner run at once.
// 0, the default, means no limit.
func WithMaxConcurrentPerOwner(n int) Option {
	return func(c *config) { c.maxOwner = n }
}

// WithQueueWhenFull makes a spawn over a concurrency limit wait as queued,
// first in first out, instead of failing with ErrLimit.
func WithQueueWhenFull() Option {
	return func(c *config) { c.queueWhenFull = true }
}

// WithMaxDepth limits lineage depth: a task spawned inside a task is at
// depth 1, and so on. A spawn deeper than n fails with ErrDepthLimit.
// 0, the default, means no limit.
func WithMaxDepth(n int) Option {
	return func(c *config) { c.maxDepth = n }
}

// WithMaxChildren limits how many live, attached children one task may
// have. A spawn over it fails with ErrFanOutLimit. 0, the default, means no
// limit.
func WithMaxChildren(n int) Option {
	return func(c *config) { c.maxChildren = n }
}

// WithCommitRetry sets how many times a task's terminal record is tried
// against the Store, with backoff doubling between tries, before the owner
// gets an EventCommitFailed. Defaults DefaultCommitAttempts and
// DefaultCommitBackoff.
func WithCommitRetry(attempts int, backoff time.Duration) Option {
	return func(c *config) { c.commitAttempts, c.commitBackoff = attempts, backoff }
}

// WithCancelledRunsKept sets how many cancelled run ids without live tasks
// are remembered, so that late spawns into them are still refused. The
// oldest are forgotten first. Default DefaultCancelledRunsKept.
func WithCancelledRunsKept(n int) Option {
	return func(c *config) { c.runMemory = n }
}

// WithInboxOptions sets the options of the inboxes the Manager makes for
// owners and sub-agents (high-water mark, coalescing, fallback).
func WithInboxOptions(opts ...InboxOption) Option {
	return func(c *config) { c.inboxOpts = append(c.inboxOpts, opts...) }
}

// WithMaxResultBytes caps a completed task's result, as JSON, in its record
// and its completion event. A larger result is replaced by the JSON object
//
//	{"truncated":true,"original_bytes":N,"preview":"<the start of the result's JSON text>"}
//
// of at most n bytes. Default DefaultMaxResultBytes; 0 means the default, and
// a negative n makes New fail.
func WithMaxResultBytes(n int) Option {
	return func(c *config) { c.caps.result = n }
}

// WithMaxErrorBytes caps a failed task's error text, and its panic stack, in
// its record and its events. A longer text keeps its start, cut at a rune
// boundary, and ends with "…[truncated: N bytes total]", in at most n bytes.
// Default DefaultMaxErrorBytes; 0 means the default, and a negative n makes
// New fail.
func WithMaxErrorBytes(n int) Option {
	return func(c *config) { c.caps.err = n }
}

// WithMaxPayloadBytes caps a custom event's payload, as JSON (Task.Emit),
// in the event and the task's progress. A larger payload is replaced by a
// JSON object like the one of WithMaxResultBytes, of at most n bytes.
// Messages are capped by WithMaxMessageBytes instead. Default
// DefaultMaxPayloadBytes; 0 means the default, and a negative n makes New
// fail.
func WithMaxPayloadBytes(n int) Option {
	return func(c *config) { c.caps.payload = n }
}

// WithMaxPromptBytes caps an input request's prompt (Task.RequestInput) in
// the record and the event, cut like an error text (WithMaxErrorBytes).
// Default DefaultMaxPromptBytes; 0 means the default, and a negative n makes
// New fail.
func WithMaxPromptBytes(n int) Option {
	return func(c *config) { c.caps.prompt = n }
}

// WithMaxMessageBytes caps the Content and the From of a Message, sent to a
// sub-agent (Owner.Send, including an answer to an input request) or by a
// task to its owner (Task.Emit of a Message), each cut like an error text
// (WithMaxErrorBytes). A message payload that is not a Message is capped as
// a payload of WithMaxMessageBytes. Default DefaultMaxMessageBytes; 0 means
// the default, and a negative n makes New fail.
func WithMaxMessageBytes(n int) Option {
	return func(c *config) { c.caps.message = n }
}

// validate checks the options once they are all applied, and fills in the
// defaults that depend on them. The first invalid value found, in the order
// of the checks below, is the error.
func (c *config) validate() error {
	if c.storeSet && c.store == nil {
		return fmt.Errorf("bgtask: WithStore: nil store")
	}
	if c.instanceSet && c.instance == "" {
		return fmt.Errorf("bgtask: WithInstance: empty id")
	}
	for _, l := range []struct {
		name string
		n    int
		what string
	}{
		{"WithMaxConcurrent", c.maxRunning, "limit"},
		{"WithMaxConcurrentPerOwner", c.maxOwner, "limit"},
		{"WithMaxDepth", c.maxDepth, "limit"},
		{"WithMaxChildren", c.maxChildren, "limit"},
		{"WithCancelledRunsKept", c.runMemory, "count"},
	} {
		if l.n < 0 {
			return fmt.Errorf("bgtask: %s(%d): negative %s", l.name, l.n, l.what)
		}
	}
	if c.progressInterval < 0 {
		return fmt.Errorf("bgtask: WithProgressInterval(%v): negative interval", c.progressInterval)
	}
	if c.commitAttempts < 1 || c.commitBackoff < 0 {
		return fmt.Errorf("bgtask: WithCommitRetry(%d, %v): need attempts >= 1 and backoff >= 0", c.commitAttempts, c.commitBackoff)
	}
	for _, sc := range []struct {
		name string
		n    *int
		def  int
	}{
		{"WithMaxResultBytes", &c.caps.result, DefaultMaxResultBytes},
		{"WithMaxErrorBytes", &c.caps.err, DefaultMaxErrorBytes},
		{"WithMaxPayloadBytes", &c.caps.payload, DefaultMaxPayloadBytes},
		{"WithMaxPromptBytes", &c.caps.prompt, DefaultMaxPromptBytes},
		{"WithMaxMessageBytes", &c.caps.message, DefaultMaxMessageBytes},
		{"WithTagCaps", &c.tagCount, DefaultMaxTags},
		{"WithTagCaps", &c.tagBytes, DefaultMaxTagBytes},
	} {
		if *sc.n < 0 {
			return fmt.Errorf("bgtask: %s(%d): negative size", sc.name, *sc.n)
		}
		if *sc.n == 0 {
			*sc.n = sc.def
		}
	}
	return nil
}

// SpawnOption configures one spawn.
type SpawnOption func(*spawnConfig)

type spawnConfig struct {
	name, typ, description string
	parent                 bgtype.Parent
	detached               bool
	wake                   bgtype.WakePolicy
	tags                   []string
	timeout                time.Duration // WithTimeout
	deadline               time.Time     // WithDeadline
	timed                  timedBy
	key                    string // WithIdempotencyKey
	keySet                 bool
	foreground             bool // Owner.Foreground: held in the foreground until promoted
	cancelOnAbandon        bool // WithCancelOnAbandon
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
func WithParent(p bgtype.Parent) SpawnOption { return func(c *spawnConfig) { c.parent = p } }

// WithDetached keeps the task out of cascades: cancelling its parent task or
// its run does not cancel it. Its lineage is still
// recorded. Owner.CancelAll and Shutdown still cancel it.
func WithDetached() SpawnOption { return func(c *spawnConfig) { c.detached = true } }
