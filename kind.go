package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Errors of resumable tasks (Kind).
var (
	// ErrSuperseded is returned by Checkpoint.Save when the attempt that
	// saves is no longer the task's current one: a stop or a recovery put
	// the task back in the queue, or another instance runs a newer
	// attempt. Nothing was written; the function should return at once,
	// and whatever it returns is dropped.
	ErrSuperseded = errors.New("bgtask: attempt superseded: a newer attempt of the task took over")
	// ErrYield is what a kind's function returns, after it saved a
	// checkpoint, once Task.Draining is closed (the Manager is stopping
	// for a deploy): the task goes back to the queue at once for another
	// process to resume, without costing an attempt and without an end.
	// Returned while the Manager is not stopping, it is an error like any
	// other.
	ErrYield = errors.New("bgtask: yield: resume this task in another process")
	// ErrKindNotRegistered is returned by Kind.Spawn when the Manager was
	// not given the kind (WithKinds): no process could resume it.
	ErrKindNotRegistered = errors.New("bgtask: kind not registered with this manager")
	// ErrTooLarge is matched by the error of a Kind.Spawn whose spec, or a
	// Checkpoint.Save whose value, encodes to more than the kind's cap
	// (KindConfig): nothing is cut, nothing is written.
	ErrTooLarge = errors.New("bgtask: too large")
)

// KindFunc is the work of a resumable task: a Func that also receives the
// spec it was spawned with and its checkpoint, whose Last value is what
// the previous attempt saved (nothing on the first attempt). Its result
// and error mean what a Func's mean; see Kind for retries and Task.Draining
// for a stop.
type KindFunc[S, C any] func(ctx context.Context, t *Task, spec S, cp *Checkpoint[C]) (any, error)

// RetryPolicy says how many attempts a resumable task may take and how
// long it waits between two. The zero value is the default policy.
type RetryPolicy struct {
	// MaxAttempts is how many attempts the task may take, the first
	// included, whatever ends them (an error, a crash of the process);
	// an attempt that yields to a stop (ErrYield) is not counted. Default
	// 3: agent work is billed per token. 1 never retries; at most 100.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt after an
	// error; each next wait is doubled, up to MaxBackoff. Default 1s,
	// MaxBackoff default 5m. A new attempt after a crash or a stop starts
	// as soon as an instance claims it.
	InitialBackoff, MaxBackoff time.Duration
	// Retryable reports whether an attempt that returned err may be
	// followed by another. Nil retries every error but a Permanent one.
	// A cancelled task and a spec that no longer decodes are never
	// retried.
	Retryable func(err error) bool
}

// KindConfig configures a Kind. The zero value is the defaults.
type KindConfig struct {
	Retry RetryPolicy
	// MaxSpecBytes caps a spawn's spec as JSON (default 64 KiB):
	// a bigger one fails the spawn with ErrTooLarge.
	MaxSpecBytes int
	// MaxCheckpointBytes caps a checkpoint as JSON (default 16 KiB): a
	// bigger one fails its Save with ErrTooLarge. Keep a cursor in the
	// checkpoint and bigger state in the host's storage.
	MaxCheckpointBytes int
	// UnclaimedAfter is how long a task of this kind may wait in the queue
	// for an instance that registered the kind before a Manager that
	// finds it ends it failed with an error that says so. Default 10m.
	UnclaimedAfter time.Duration
	// MaxRunning, when positive, is how many attempts of the kind may run
	// at once. With a store that is a store.KindLimiter (pgstore) it holds
	// across every instance sharing the store: a task of the kind is
	// spawned into the queue and every attempt starts by a claim, counted
	// and committed atomically, by any instance with room. With another
	// store it holds in this process: an attempt beyond it waits for a
	// slot before its function runs (its record says running), and a
	// Manager does not claim a task of a kind at its limit. An attempt
	// backing off before a retry keeps its slot. Zero: no limit.
	MaxRunning int
	// ExhaustAsk, when set, asks the owner instead of ending a task whose
	// attempts ran out (by errors or by crashes): one input request
	// (Task.RequestInput) whose answer "resume" grants another round of
	// MaxAttempts attempts from the last checkpoint and "abandon" ends the
	// task failed with the last error; any other answer is asked again.
	// The request is asked by the task's goroutine, or, after a crash, by
	// the instance that claims the task; the answer may be sent on any
	// instance. A task that is asked does not end until answered or
	// cancelled.
	ExhaustAsk bool
}

const (
	defaultKindAttempts   = 3
	maxKindAttempts       = 100
	defaultInitialBackoff = time.Second
	defaultMaxBackoff     = 5 * time.Minute
	defaultMaxSpecBytes   = 64 << 10
	defaultMaxCheckpoint  = 16 << 10
	defaultUnclaimedAfter = 10 * time.Minute
)

// kindName is a kind's stable name: a path of lowercase words and a
// version, as "crawl/v1" or "research/deep/v2".
var kindName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*/v[0-9]+$`)

// Kind is a registered kind of resumable task: a stable, versioned name,
// a spec type S (what a spawn is given, kept on the record as JSON) and a
// checkpoint type C (what an attempt saves for the next one). A task
// spawned from a Kind survives its process: after a crash its record goes
// back to the queue and a Manager that registered the kind (WithKinds), in
// this process's next life or in another process sharing the store,
// claims it once and runs a new attempt from the last checkpoint; a
// closure (Spawn) is never re-run.
//
// Between two checkpoints the work is at least once: an attempt that
// crashed after a side effect and before its next Save repeats it. Use
// Task.StepKey as the idempotency key of such an effect.
//
// Make one with NewKind, register it with WithKinds, spawn with
// Kind.Spawn. A Kind is immutable and safe for concurrent use.
type Kind[S, C any] struct {
	name string
	fn   KindFunc[S, C]
	cfg  KindConfig
}

// NewKind returns the kind name running fn. name must be a stable,
// versioned path ("crawl/v1"): records keep it, and a process resumes a
// task only under that exact name, so change the version when S or C
// change incompatibly. An invalid name, a nil fn or a negative or too
// big setting is an error matching ErrInvalidArgument.
func NewKind[S, C any](name string, fn KindFunc[S, C], cfg KindConfig) (*Kind[S, C], error) {
	switch {
	case !kindName.MatchString(name):
		return nil, invalidArgument("kind name %q is not a versioned path such as \"crawl/v1\"", name)
	case fn == nil:
		return nil, invalidArgument("kind %s: nil function", name)
	case cfg.Retry.MaxAttempts < 0 || cfg.Retry.MaxAttempts > maxKindAttempts:
		return nil, invalidArgument("kind %s: MaxAttempts %d not in 0..%d", name, cfg.Retry.MaxAttempts, maxKindAttempts)
	case cfg.Retry.InitialBackoff < 0 || cfg.Retry.MaxBackoff < 0 || cfg.MaxSpecBytes < 0 || cfg.MaxCheckpointBytes < 0 || cfg.UnclaimedAfter < 0 || cfg.MaxRunning < 0:
		return nil, invalidArgument("kind %s: negative setting", name)
	}
	cfg.Retry.MaxAttempts = orDefault(cfg.Retry.MaxAttempts, defaultKindAttempts)
	cfg.Retry.InitialBackoff = orDefault(cfg.Retry.InitialBackoff, defaultInitialBackoff)
	cfg.Retry.MaxBackoff = max(orDefault(cfg.Retry.MaxBackoff, defaultMaxBackoff), cfg.Retry.InitialBackoff)
	cfg.MaxSpecBytes = orDefault(cfg.MaxSpecBytes, defaultMaxSpecBytes)
	cfg.MaxCheckpointBytes = orDefault(cfg.MaxCheckpointBytes, defaultMaxCheckpoint)
	cfg.UnclaimedAfter = orDefault(cfg.UnclaimedAfter, defaultUnclaimedAfter)
	return &Kind[S, C]{name: name, fn: fn, cfg: cfg}, nil
}

// Name returns the kind's name.
func (k *Kind[S, C]) Name() string { return k.name }

// Spawn starts a task of this kind for owner o with spec, as Owner.Spawn
// starts a closure (the same options and errors), and persists spec on its
// record. It also fails with ErrKindNotRegistered when o's Manager was not
// given k (WithKinds), and with an error matching ErrTooLarge when spec
// encodes to more than KindConfig.MaxSpecBytes, or ErrInvalidArgument when
// it does not encode.
func (k *Kind[S, C]) Spawn(ctx context.Context, o Owner, spec S, opts ...SpawnOption) (string, error) {
	m := o.m
	if m.kinds[k.name] != Runner(k) {
		return "", fmt.Errorf("%w: %s", ErrKindNotRegistered, k.name)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", invalidArgument("kind %s: spec does not encode: %v", k.name, err)
	}
	if len(raw) > k.cfg.MaxSpecBytes {
		return "", fmt.Errorf("%w: kind %s: spec of %d bytes, the cap is %d", ErrTooLarge, k.name, len(raw), k.cfg.MaxSpecBytes)
	}
	res := &bgtype.Resume{Kind: k.name, Spec: raw, MaxAttempts: k.cfg.Retry.MaxAttempts, Ask: k.cfg.ExhaustAsk}
	opts = append(opts[:len(opts):len(opts)], func(c *spawnConfig) { c.resume = res })
	if k.cfg.MaxRunning > 0 && m.limiter() != nil {
		return m.spawnQueued(ctx, o.id, k.taskFunc(spec), opts)
	}
	return m.spawn(ctx, o.id, k.taskFunc(spec), false, opts)
}

// Runner is a registered kind, as WithKinds takes it: a *Kind of any spec
// and checkpoint type. Only this package implements it.
type Runner interface {
	// KindName returns the kind's name.
	KindName() string
	// resumeFunc decodes a record's spec and returns the function that
	// runs its next attempt; an error when the spec no longer decodes.
	resumeFunc(meta *bgtype.TaskMeta) (Func, error)
	unclaimedAfter() time.Duration
	maxRunning() int
}

// KindName returns the kind's name (Runner).
func (k *Kind[S, C]) KindName() string { return k.name }

func (k *Kind[S, C]) unclaimedAfter() time.Duration { return k.cfg.UnclaimedAfter }

func (k *Kind[S, C]) maxRunning() int { return k.cfg.MaxRunning }

func (k *Kind[S, C]) resumeFunc(meta *bgtype.TaskMeta) (Func, error) {
	var spec S
	if err := json.Unmarshal(meta.Resume.Spec, &spec); err != nil {
		return nil, fmt.Errorf("bgtask: kind %s: the spec no longer decodes: %w", k.name, err)
	}
	return k.taskFunc(spec), nil
}

// WithKinds registers the kinds this Manager can run: it may spawn them,
// and, with a Store that keeps a queue of resumable tasks
// (store.KindQueue, as sqlitestore), it claims their tasks that wait to be
// resumed, each once, and ends those of a kind no instance registers
// once they waited longer than its UnclaimedAfter. Two kinds of one name
// are an error matching ErrInvalidArgument at New.
func WithKinds(kinds ...Runner) Option {
	return func(c *config) { c.kinds = append(c.kinds, kinds...) }
}

// Permanent marks err as not worth another attempt: a kind's function
// that returns it fails at once, whatever its retry policy says.
// errors.Is and errors.As see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// retryable reports whether an attempt that returned err may be retried.
func (k *Kind[S, C]) retryable(err error) bool {
	if _, ok := errors.AsType[permanentError](err); ok {
		return false
	}
	return k.cfg.Retry.Retryable == nil || k.cfg.Retry.Retryable(err)
}

// backoff is the wait before attempt n+1 after attempt n (counted) failed.
func (k *Kind[S, C]) backoff(n int64) time.Duration {
	d := k.cfg.Retry.InitialBackoff
	for i := int64(1); i < n && d < k.cfg.Retry.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, k.cfg.Retry.MaxBackoff)
}

// requeueError is what a kind's task function returns to put its task
// back in the queue instead of ending it (returned recognises it).
type requeueError struct {
	why   string
	yield bool
}

func (e *requeueError) Error() string { return "bgtask: requeued: " + e.why }

// taskFunc is the Func that runs a kind's attempts in this process: the
// function, then, while an error may be retried, a backoff and the next
// attempt, each fenced on a new Attempt of the record.
func (k *Kind[S, C]) taskFunc(spec S) Func {
	return func(ctx context.Context, t *Task) (any, error) {
		release, err := k.kindSlot(ctx, t.m)
		if err != nil {
			return nil, err
		}
		defer release()
		for {
			meta := t.record()
			if r := meta.Resume; r.Ask && r.Counted(meta.Attempt) > r.Limit() {
				// A crash took its last attempt: its owner decides.
				if err := k.askOwner(ctx, t, errors.New(r.LastError)); err != nil {
					return nil, err
				}
				meta = t.record()
			}
			cp := &Checkpoint[C]{t: t, k: k, attempt: meta.Attempt}
			if err := cp.load(meta.Resume); err != nil {
				return nil, err // a checkpoint that no longer decodes: no attempt could use it
			}
			v, err := k.fn(ctx, t, spec, cp)
			if err == nil {
				return v, nil
			}
			if errors.Is(err, ErrYield) && t.m.draining() {
				return nil, &requeueError{why: t.m.stopWhy(), yield: true}
			}
			if ctx.Err() != nil || !k.retryable(err) {
				return v, err
			}
			meta = t.record()
			n := meta.Resume.Counted(meta.Attempt)
			wait := k.backoff(n)
			if n >= meta.Resume.Limit() {
				if !meta.Resume.Ask {
					if n == 1 {
						return v, err
					}
					return v, fmt.Errorf("gave up after %d attempts (kind %s): %w", n, k.name, err)
				}
				if err := k.askOwner(ctx, t, err); err != nil {
					return v, err
				}
				meta, wait = t.record(), 0 // the owner said resume: at once
			}
			if err := k.nextAttempt(ctx, t, &meta, err, wait); err != nil {
				return nil, err
			}
		}
	}
}

// nextAttempt records that the attempt failed with failure and waits
// for wait; an error when the task was cancelled meanwhile (it ends
// cancelled at once) or the record could not be written.
func (k *Kind[S, C]) nextAttempt(ctx context.Context, t *Task, meta *bgtype.TaskMeta, failure error, wait time.Duration) error {
	u := *meta
	u.Resume = meta.Resume.Clone()
	u.Resume.LastError = failure.Error()
	u.Attempt++
	if err := t.m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: kind %s: record attempt %d: %w (after %w)", k.name, u.Attempt, err, failure)
	}
	if wait == 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// record returns a copy of the task's current record.
func (t *Task) record() bgtype.TaskMeta {
	var u bgtype.TaskMeta
	t.m.readRecord(t, &u)
	return u.Clone()
}

// Attempt returns which attempt of a resumable task this is, counting
// from 1 (yields to a stop not counted), or 0 for a closure, which has
// only one.
func (t *Task) Attempt() int {
	meta := t.record()
	if meta.Resume == nil {
		return 0
	}
	return int(meta.Resume.Counted(meta.Attempt))
}

// StepKey returns a key for one step of the task's work, the same in every
// attempt: the task id and step. Give it to an outside system as the
// idempotency key of the step's side effect, so that a step that ran
// before a crash but after the last checkpoint does not take effect twice
// when the next attempt runs it again.
func (t *Task) StepKey(step string) string { return t.rec.ID + "/" + step }

// Draining returns a channel that is closed when the Manager begins to
// stop (Stop or Shutdown). A resumable task selects on it, saves its
// checkpoint and returns ErrYield: it is requeued for another process, at
// no cost of an attempt. A closure may select on it too.
func (t *Task) Draining() <-chan struct{} { return t.m.drain }

// draining reports whether the Manager began to stop.
func (m *Manager) draining() bool {
	select {
	case <-m.drain:
		return true
	default:
		return false
	}
}
