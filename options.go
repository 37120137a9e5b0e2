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
}

// Defaults for the options below.
const (
	DefaultCommitAttempts    = 3
	DefaultCommitBackoff     = 50 * time.Millisecond
	DefaultCancelledRunsKept = 4096
)

func defaultConfig() config {
	return config{
		logger:         discardLogger,
		commitAttempts: DefaultCommitAttempts,
		commitBackoff:  DefaultCommitBackoff,
		runMemory:      DefaultCancelledRunsKept,
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
