package bgtask

import (
	"log/slog"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Option configures a Manager. New applies the options in order (a later
// one wins) and then checks the result once: an invalid value makes New fail
// with an error matching ErrInvalidArgument that names the option or field.
//
// Most hosts need at most WithStore, WithLogger and WithInstance. The
// tuning knobs come in three groups, each a struct whose zero value is the
// default: WithLimits (how much runs at once), WithCaps (sizes kept in
// records and events) and WithTuning (commit retries, progress writes,
// memory of cancelled runs).
type Option func(*config)

type config struct {
	store          store.Store
	retention      *Retention // the in-memory store's (WithRetention)
	logger         *slog.Logger
	observer       func(Transition)
	eventObserver  func(bgtype.Event)
	instance       string
	onPendingOwner func(owner string) // WithOnPendingOwner
	inbox          InboxConfig
	kinds          []Runner // WithKinds

	limits Limits
	caps   Caps   // every field set (> 0) once validated
	tuning Tuning // every field set once validated; a negative one is 0

	// Set by an option, to tell an explicit bad value from the default.
	storeSet, instanceSet bool
}

// The documented defaults of Caps and Tuning.
const (
	defaultMaxResultBytes  = 64 << 10
	defaultMaxErrorBytes   = 16 << 10
	defaultMaxPayloadBytes = 16 << 10
	defaultMaxPromptBytes  = 4 << 10
	defaultMaxMessageBytes = 16 << 10
	defaultMaxTags         = 16
	defaultMaxTagBytes     = 64
	defaultMaxOutputBytes  = 64 << 10

	defaultCommitAttempts   = 3
	defaultCommitBackoff    = 50 * time.Millisecond
	defaultProgressInterval = time.Second
	defaultCanceledRunsKept = 4096
	defaultKeptEventsTotal  = 100_000
)

func defaultConfig() config {
	return config{logger: discardLogger}
}

// Limits bounds how many tasks run at once and how far a lineage grows. A
// spawn over a limit fails, or waits as queued (QueueWhenFull); nothing
// already running is touched. The zero value sets no limit. WithLimits
// copies it: changing it afterwards changes nothing.
type Limits struct {
	// MaxConcurrent is how many tasks may run at once across all owners.
	// Defaults to 0: no limit. Negative makes New fail.
	MaxConcurrent int
	// MaxConcurrentPerOwner is how many tasks of one owner may run at once.
	// Defaults to 0: no limit. Negative makes New fail.
	MaxConcurrentPerOwner int
	// QueueWhenFull makes a spawn over MaxConcurrent or
	// MaxConcurrentPerOwner wait as queued, first in first out, instead of
	// failing with ErrLimit. Defaults to false: the spawn fails.
	QueueWhenFull bool
	// MaxDepth is how deep a lineage may grow: a task spawned inside a task
	// is at depth 1, and so on. A deeper spawn fails with ErrLimit (lineage depth).
	// Defaults to 0: no limit. Negative makes New fail.
	MaxDepth int
	// MaxChildren is how many live, attached children one task may have. A
	// spawn over it fails with ErrLimit (fan-out). Defaults to 0: no limit.
	// Negative makes New fail.
	MaxChildren int
}

// WithLimits sets the Manager's concurrency and lineage limits. A later
// WithLimits replaces an earlier one whole. Default: Limits{}, no limit.
func WithLimits(l Limits) Option {
	return func(c *config) { c.limits = l }
}

// Caps bounds what a task hands to its owner, as kept in its record and in
// events, and its tags. Something larger than a size cap is cut, with a
// marker that says so and gives the original size; too many or too long
// tags make the spawn fail with an error matching ErrInvalidArgument. In
// every field 0 means the default, and a negative value makes New fail, so
// the zero value is every default. WithCaps copies it: changing it
// afterwards changes nothing.
type Caps struct {
	// MaxResultBytes caps a completed task's result, as JSON, in its record
	// and its completion event. A larger result is replaced by the JSON
	// object
	//
	//	{"truncated":true,"original_bytes":N,"preview":"<the start of the result's JSON text>"}
	//
	// of at most this many bytes. Defaults to 64 KiB.
	MaxResultBytes int
	// MaxErrorBytes caps a failed task's error text, and its panic stack, in
	// its record and its events. A longer text keeps its start, cut at a
	// rune boundary, and ends with "…[truncated: N bytes total]", in at most
	// this many bytes. Defaults to 16 KiB.
	MaxErrorBytes int
	// MaxPayloadBytes caps a custom event's payload, as JSON (Task.Emit), in
	// the event and the task's progress, replaced by an object like the one
	// of MaxResultBytes. Messages are capped by MaxMessageBytes instead.
	// Defaults to 16 KiB.
	MaxPayloadBytes int
	// MaxPromptBytes caps an input request's prompt (Task.RequestInput) in
	// the record and the event, cut like an error text. Defaults to 4 KiB.
	MaxPromptBytes int
	// MaxMessageBytes caps the Content and the From of a Message, sent to a
	// sub-agent (Owner.Send, including an answer to an input request) or by
	// a task to its owner (Task.Emit of a Message), and a progress message
	// (Task.ReportProgress), each cut like an error text. A message payload
	// that is not a Message is capped as a payload of this size. Defaults
	// to 16 KiB.
	MaxMessageBytes int
	// MaxTags is how many tags one task may have (WithTags). Defaults to 16.
	MaxTags int
	// MaxTagBytes is how many bytes one tag may hold. Defaults to 64.
	MaxTagBytes int
	// MaxOutputBytes is how many bytes of a task's output (Task.Output)
	// are kept: the last ones written; the oldest are dropped first and
	// counted (Output.Dropped). Defaults to 64 KiB.
	MaxOutputBytes int
}

// WithCaps sets the Manager's size caps. A later WithCaps replaces an
// earlier one whole; a field left 0 keeps its default.
func WithCaps(caps Caps) Option {
	return func(c *config) { c.caps = caps }
}

// Tuning holds the knobs of the Manager's writes to its Store and of its
// memory. In every field 0 means the default (so the zero value is every
// default); where a negative value is allowed it means none. WithTuning
// copies it: changing it afterwards changes nothing.
type Tuning struct {
	// CommitAttempts is how many times a task's terminal record is tried
	// against the Store, with backoff doubling between tries, before the
	// owner gets an EventCommitFailed. Defaults to 3. Negative makes New
	// fail.
	CommitAttempts int
	// CommitBackoff is the wait before the second try of a commit; it
	// doubles before each later one. Defaults to 50ms; negative means no
	// wait.
	CommitBackoff time.Duration
	// ProgressInterval is how often, at most, one task's progress
	// (Task.ReportProgress) is written to the Store. The first report is
	// written at once; later ones within the interval are folded into one
	// trailing write when it has passed, and the last one also into the
	// task's terminal record, so the latest value always reaches the Store.
	// Defaults to 1s; negative writes every report, though still never more
	// than one write per task at a time.
	ProgressInterval time.Duration
	// CanceledRunsKept is how many cancelled run ids without live tasks
	// are remembered, so that late spawns into them are still refused. The
	// oldest are forgotten first. Defaults to 4096; negative means none.
	CanceledRunsKept int
	// KeptEventsTotal is how many events the Manager keeps in all for the
	// owners whose Receiver was closed (a server that evicted a thread),
	// until each owner's next Receiver takes them; each owner's own are
	// bounded by its ReceiverConfig.KeepLimit. At the limit the oldest
	// kept event that does not end a task goes first, across owners, with
	// a warning in the log; when every kept event ends a task, the oldest
	// of those goes (a new event that does not end one is then the one
	// dropped), with an error in the log. A durable Store keeps no ends
	// here: its records, still unannounced, are announced at the owner's
	// next run. Defaults to 100,000 (the in-memory store's default total of
	// terminal records); negative makes New fail.
	KeptEventsTotal int
}

// WithTuning sets how the Manager retries commits, throttles progress
// writes, remembers cancelled runs and bounds the events kept for closed
// owners. A later WithTuning replaces an
// earlier one whole; a field left 0 keeps its default.
func WithTuning(t Tuning) Option {
	return func(c *config) { c.tuning = t }
}

// WithStore sets where task metadata is committed. Default: a new
// memstore.New(). A nil store makes New fail.
func WithStore(s store.Store) Option {
	return func(c *config) { c.store, c.storeSet = s, true }
}

// WithLogger sets the logger. Default: discard (the library is silent).
// A nil logger keeps the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithObserver sets a function called after every committed status
// transition, on the goroutine that committed it (the spawner, or the
// task's), before that goroutine goes on, so one task's transitions reach
// it in order and a task's end is observed before Wait returns it; no lock
// of bgtask is held, so it may call the Manager (Get, Spawn, Cancel...),
// but not wait for the task it observes (Wait) nor for Shutdown or Stop:
// they wait for the goroutine it runs on. A Restore reports the records it
// interrupts once it released its lock, before it returns. A panic in it
// is recovered and logged with the callback's name.
func WithObserver(f func(Transition)) Option {
	return func(c *config) { c.observer = f }
}

// WithEventObserver sets a function called with every custom event a task
// emits (Task.Emit, messages included), whatever the task's wake policy and
// whether or not the event reaches an inbox; input requests and the end of
// a task are transitions (WithObserver). It is also called with each
// EventCommitFailed: the end of a task whose terminal record could not be
// committed, which no transition reports. It is called as WithObserver's
// function is: on the task's goroutine (the one that called Emit), after
// the event was kept and sent and Emit released the task's lock, so it may
// call the Manager or the task (LatestEvent, Cancel); the events one
// goroutine emits reach it in order.
// The event's Payload is shared with the inbox: read it, never modify it.
// A panic in it is recovered and logged with the callback's name.
func WithEventObserver(f func(bgtype.Event)) Option {
	return func(c *config) { c.eventObserver = f }
}

// WithInstance names this runtime instance; records carry it so a restart
// can tell its own tasks from those of a process that is gone. Default: a
// new random id per Manager. An empty id makes New fail.
func WithInstance(id string) Option {
	return func(c *config) { c.instance, c.instanceSet = id, true }
}

// WithInboxConfig configures the inboxes the Manager makes for owners and
// sub-agents: high-water mark, coalescing, logger (the Manager's, WithLogger,
// when nil). Its OnClosed is the fallback of an owner's inbox made by
// Manager.Inbox; the inboxes of Receivers and sub-agents have the Manager's
// own fallback, which keeps their late events. The last WithInboxConfig
// wins; the zero value is InboxConfig's default.
func WithInboxConfig(cfg InboxConfig) Option {
	cfg.Coalesce = slices.Clone(cfg.Coalesce)
	return func(c *config) { c.inbox = cfg }
}

// validate checks the options once they are all applied, and fills in the
// defaults. The first invalid value found, in the order of the checks
// below, is the error.
func (c *config) validate() error {
	if c.storeSet && c.store == nil {
		return invalidArgument("WithStore: nil store")
	}
	if c.instanceSet && c.instance == "" {
		return invalidArgument("WithInstance: empty id")
	}
	seen := make(map[string]bool, len(c.kinds))
	for _, k := range c.kinds {
		if k == nil {
			return invalidArgument("WithKinds: nil kind")
		}
		if seen[k.KindName()] {
			return invalidArgument("WithKinds: kind %s registered twice", k.KindName())
		}
		seen[k.KindName()] = true
	}
	for _, f := range []struct {
		name string
		n    *int
		def  int // 0: no default (0 means no limit)
	}{
		{"Limits.MaxConcurrent", &c.limits.MaxConcurrent, 0},
		{"Limits.MaxConcurrentPerOwner", &c.limits.MaxConcurrentPerOwner, 0},
		{"Limits.MaxDepth", &c.limits.MaxDepth, 0},
		{"Limits.MaxChildren", &c.limits.MaxChildren, 0},
		{"Caps.MaxResultBytes", &c.caps.MaxResultBytes, defaultMaxResultBytes},
		{"Caps.MaxErrorBytes", &c.caps.MaxErrorBytes, defaultMaxErrorBytes},
		{"Caps.MaxPayloadBytes", &c.caps.MaxPayloadBytes, defaultMaxPayloadBytes},
		{"Caps.MaxPromptBytes", &c.caps.MaxPromptBytes, defaultMaxPromptBytes},
		{"Caps.MaxMessageBytes", &c.caps.MaxMessageBytes, defaultMaxMessageBytes},
		{"Caps.MaxTags", &c.caps.MaxTags, defaultMaxTags},
		{"Caps.MaxTagBytes", &c.caps.MaxTagBytes, defaultMaxTagBytes},
		{"Caps.MaxOutputBytes", &c.caps.MaxOutputBytes, defaultMaxOutputBytes},
		{"Tuning.CommitAttempts", &c.tuning.CommitAttempts, defaultCommitAttempts},
		{"Tuning.KeptEventsTotal", &c.tuning.KeptEventsTotal, defaultKeptEventsTotal},
	} {
		if *f.n < 0 {
			return invalidArgument("%s is %d, must not be negative", f.name, *f.n)
		}
		if *f.n == 0 {
			*f.n = f.def
		}
	}
	t := &c.tuning
	t.CommitBackoff = orDefault(t.CommitBackoff, defaultCommitBackoff)
	t.ProgressInterval = orDefault(t.ProgressInterval, defaultProgressInterval)
	t.CanceledRunsKept = orDefault(t.CanceledRunsKept, defaultCanceledRunsKept)
	return nil
}

// orDefault returns def for 0, 0 for a negative v (none), and v otherwise.
func orDefault[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
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
	foreground             bool                         // Owner.Foreground: held in the foreground until promoted
	cancelOnAbandon        bool                         // WithCancelOnAbandon
	outputFunc             func(offset int64, p []byte) // WithOutputFunc
	resume                 *bgtype.Resume               // Kind.Spawn: the first record of a resumable task
	adopt                  *bgtype.TaskMeta             // a claimed record of a resumable task: its next attempt runs here
	waiting                bool                         // Kind.Spawn of a kind with a fleet-wide MaxRunning: the record waits for a claim
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

// MaxResultBytes returns the cap on a completed task's result in its record
// and events (Caps.MaxResultBytes, 64 KiB by default): a
// longer result, as JSON, is replaced by a truncation marker. A server that
// must hand a client the whole result keeps those past it itself.
func (m *Manager) MaxResultBytes() int { return m.cfg.caps.MaxResultBytes }

// discardLogger is the default: the library is silent unless given a logger.
var discardLogger = slog.New(slog.DiscardHandler)
