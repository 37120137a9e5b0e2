package agent

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// ErrTooManyThreads is returned by [Threads.Acquire] for a thread that is
// not live when ThreadsConfig.MaxThreads threads are live and every one is
// held: none can be closed to make room. Nothing changed; a server answers
// it as busy (503) and the client retries later.
var ErrTooManyThreads = errors.New("agent: too many threads: every live thread is held")

// Defaults of [ThreadsConfig].
const (
	defaultMaxThreads  = 10_000
	defaultIdleTimeout = 30 * time.Minute
)

// ThreadsConfig configures [NewThreads]. T is the host's value of a thread
// (its tools, its conversation), made by New once the thread's Plugin
// exists. The zero value is usable: 10,000 threads at most, closed after 30
// minutes nobody held them, Plugins with their default options, the zero T.
//
// The hooks are the host's code: the registry calls them with none of its
// locks held, so a hook may call the registry (Lookup, Len, Held, and
// Acquire of another thread), except Close, which waits for them. A panic
// in New or Config fails that Acquire (see [Threads.Acquire]); a panic in
// OnClose is recovered and logged to Logger, the thread closed all the
// same; OnWake is called as Config.Receiver.OnWake is (a panic there is the
// Manager's to recover and log).
type ThreadsConfig[T any] struct {
	// MaxThreads caps the live threads. Making a thread at the cap first
	// closes the least recently used thread nobody holds (the one released
	// longest ago); when every live thread is held, Acquire fails with
	// ErrTooManyThreads. A thread being made counts. Defaults to 10,000
	// when 0; a negative value makes NewThreads fail.
	MaxThreads int
	// IdleTimeout closes a thread nobody held for that long, counted from
	// its last Release. Defaults to 30 minutes when 0; negative: never
	// (and the registry starts no goroutine).
	IdleTimeout time.Duration
	// Config returns the configuration of the Plugin of thread (its
	// limits, for one): called each time the thread is made. Defaults to
	// nil: the zero Config. Set OnWake below rather than
	// Config.Receiver.OnWake: when OnWake is set, it replaces the
	// Receiver's. Config.Receiver.OnRunCanceled is replaced: the registry ends
	// the turn (Turn.Context).
	Config func(thread string) Config
	// New makes the host's value of thread, once its Plugin p exists and
	// before the thread is visible: no other caller sees the thread (nor
	// Lookup finds it) until New returned. ctx is the Acquire's. An error
	// fails the Acquire (wrapped); the Plugin is then closed and the
	// thread not made. Defaults to nil: the zero T.
	New func(ctx context.Context, thread string, p *Plugin) (T, error)
	// OnWake hears of each event that arrives while no run of the thread
	// is open (see Config.Receiver: it must not block, and may run on a task's
	// goroutine). It is called only with a made thread, whose Value is
	// set: an event that arrives while New runs is handed to OnWake once
	// New returned, on the Acquire's goroutine, or not at all if the
	// Acquire failed (the event itself is delivered by the thread's next
	// run, as every event is). Defaults to nil: nothing is called.
	OnWake func(th *Thread[T], ev bgtype.Event)
	// OnClose is called once for each thread the registry closes, after
	// its Plugin's Close returned (err is that Close's error, the Store's)
	// and before the thread can be made again: a host may persist the
	// thread's value there and read it back in New. why says what closed
	// it. It runs on the goroutine that closed the thread: an Acquire's
	// (CloseEvicted), the registry's idle timer (CloseIdle), a Release or
	// Close after Close began (CloseShutdown). Defaults to nil.
	OnClose func(th *Thread[T], why CloseReason, err error)
	// Logger receives the panics the registry recovers (OnClose's, and
	// New's and Config's, which also fail the Acquire). Defaults to nil:
	// discarded.
	Logger *slog.Logger
}

// CloseReason says why [Threads] closed a thread (see ThreadsConfig.OnClose).
type CloseReason int

const (
	// CloseEvicted: the thread was the least recently used one nobody
	// held, closed to make room for another at MaxThreads.
	CloseEvicted CloseReason = iota + 1
	// CloseIdle: nobody held the thread for IdleTimeout.
	CloseIdle
	// CloseShutdown: the registry's Close.
	CloseShutdown
)

// String returns "evicted", "idle" or "shutdown".
func (r CloseReason) String() string {
	switch r {
	case CloseEvicted:
		return "evicted"
	case CloseIdle:
		return "idle"
	case CloseShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("CloseReason(%d)", int(r))
}

// Threads is the registry of a server's live threads: each thread (an
// owner of the Manager) with its one live [Plugin] and the host's value
// T, made at the thread's first Acquire and kept while it is used, up to
// MaxThreads; a thread nobody holds is closed (its Plugin's Close: its
// tasks go on, and what they report goes to the thread's next Plugin,
// once) when room is needed or when it has been idle for IdleTimeout.
//
// The Manager allows one live Plugin per owner: the registry makes a
// thread's next Plugin only once the previous one's Close (and OnClose)
// returned, and a thread is visible (Acquire returns it, Lookup finds it)
// only once its Plugin and value exist. A caller holds a thread from
// Acquire to Release; a held thread is never closed. Turns of one thread
// run one at a time (see [Thread.Turn]).
//
// In a fleet (a store shared by several instances), one run of a thread is
// open across the instances: a Turn on this instance while a run of the
// thread is open on another fails with the Plugin's error, matching
// bgtask.ErrRunOpen, returned unchanged. The registry never retries it and
// leaves the thread as it was (made, held by the caller until Release, its
// turn free): the host answers it (a server: 409 Conflict, the client
// tries again) rather than wait for another instance's turn.
//
// Every method is safe for concurrent use. The zero value is not usable:
// call NewThreads; a Threads must not be copied. Close closes every thread
// and waits for the one goroutine the registry starts (the idle timer's).
type Threads[T any] struct {
	m    *bgtask.Manager
	cfg  ThreadsConfig[T] // with its defaults
	log  *slog.Logger
	kick chan struct{} // capacity 1: the idle list was empty and is not (the timer's next deadline is new)
	quit chan struct{} // closed by Close: the idle timer's goroutine returns
	done chan struct{} // closed when the idle timer's goroutine returned; nil without one

	mu      sync.Mutex               // guards the fields below and each Thread's users, idle and released
	threads map[string]*Thread[T]    // the live threads: made, not being closed
	making  map[string]chan struct{} // threads being made: closed when made (or not)
	closing map[string]chan struct{} // threads being closed: closed once OnClose returned
	idle    list.List                // live threads nobody holds, least recently released first
	held    int                      // live threads somebody holds
	closed  bool                     // Close began
	drained chan struct{}            // closed once closed and nothing is live, made or closing
	errs    []error                  // the Plugins' Close errors since Close began
}

// NewThreads returns the registry of m's threads, with cfg's defaults.
// It starts one goroutine, the idle timer's (none for a negative
// IdleTimeout), which Close stops and waits for. Errors: a nil m, a
// negative MaxThreads.
func NewThreads[T any](m *bgtask.Manager, cfg ThreadsConfig[T]) (*Threads[T], error) {
	switch {
	case m == nil:
		return nil, errors.New("agent: NewThreads: nil manager")
	case cfg.MaxThreads < 0:
		return nil, fmt.Errorf("agent: NewThreads: MaxThreads is %d, want at least 1 (0 for the default, 10,000)", cfg.MaxThreads)
	}
	if cfg.MaxThreads == 0 {
		cfg.MaxThreads = defaultMaxThreads
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Threads[T]{m: m, cfg: cfg, log: log, quit: make(chan struct{}), drained: make(chan struct{}),
		threads: make(map[string]*Thread[T]), making: make(map[string]chan struct{}), closing: make(map[string]chan struct{})}
	if cfg.IdleTimeout > 0 {
		r.kick, r.done = make(chan struct{}, 1), make(chan struct{})
		go r.idleTimer()
	}
	return r, nil
}

// Acquire returns the live thread, made if it is not live (its Plugin,
// then New), and holds it until Release: a held thread is never closed.
// Each Acquire that returns a thread needs one Release.
//
// A thread being made by another Acquire, or being closed, is waited for
// (the Manager allows one live Plugin per owner: the next Plugin is made
// once the closing one's Close returned), and so is the closing of the
// thread evicted to make room, which runs on this goroutine. The waits
// end with ctx: Acquire then returns ctx's cause and holds nothing. New
// gets ctx; the Plugins' Close does not depend on it.
//
// Errors: bgtask.ErrClosed once Close began; ErrTooManyThreads;
// bgtype.ErrInvalidOwner for a blank thread id; the Plugin's (NewPlugin:
// bgtask.ErrClosed when the Manager is shut down, bgtask.ErrReceiverExists
// when the host made a Plugin of thread outside the registry) or New's,
// wrapped; a panic in New or Config, as an error that says so (logged
// with its stack to Logger). After an error nothing is held, and no
// thread is half made.
func (r *Threads[T]) Acquire(ctx context.Context, thread string) (*Thread[T], error) {
	if !bgtype.ValidOwner(thread) {
		return nil, fmt.Errorf("agent: Threads: %w", bgtype.ErrInvalidOwner)
	}
	r.mu.Lock()
	for {
		if r.closed {
			r.mu.Unlock()
			return nil, bgtask.ErrClosed
		}
		if th := r.threads[thread]; th != nil {
			r.hold(th)
			r.mu.Unlock()
			return th, nil
		}
		wait := r.making[thread]
		if wait == nil {
			wait = r.closing[thread]
		}
		if wait == nil {
			break
		}
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		r.mu.Lock()
	}
	if ctx.Err() != nil { // a caller that left makes nothing and evicts nothing
		r.mu.Unlock()
		return nil, context.Cause(ctx)
	}
	var victim *Thread[T]
	if len(r.threads)+len(r.making) >= r.cfg.MaxThreads {
		front := r.idle.Front()
		if front == nil {
			r.mu.Unlock()
			return nil, ErrTooManyThreads
		}
		victim = front.Value.(*Thread[T])
		r.detach(victim)
	}
	made := make(chan struct{})
	r.making[thread] = made
	r.mu.Unlock()

	if victim != nil {
		r.closeThread(victim, CloseEvicted)
	}
	th, err := r.make(ctx, thread)

	r.mu.Lock()
	delete(r.making, thread)
	close(made)
	late := err == nil && r.closed
	switch {
	case late: // Close began while New ran: the thread is closed, not handed out
		r.detach(th)
		err = bgtask.ErrClosed
	case err == nil:
		r.threads[thread] = th
		r.hold(th)
	}
	r.checkDrained()
	r.mu.Unlock()
	if late {
		r.closeThread(th, CloseShutdown)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	th.flushWakes()
	return th, nil
}

// make makes the thread id: its Plugin, then the host's value. On an
// error (or a panic of a hook) the Plugin is closed again.
func (r *Threads[T]) make(ctx context.Context, id string) (_ *Thread[T], err error) {
	th := &Thread[T]{r: r, id: id}
	hook := "Config"
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("agent: Threads: a hook panicked", "hook", hook, "thread", id, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("agent: Threads: thread %q: %s panicked: %v", id, hook, v)
		}
		if err != nil && th.plugin != nil {
			_ = th.plugin.Close(context.WithoutCancel(ctx)) // no run was opened: nothing of it to commit
		}
	}()
	var cfg Config
	if r.cfg.Config != nil {
		cfg = r.cfg.Config(id)
	}
	if r.cfg.OnWake != nil {
		cfg.Receiver.OnWake = th.wake
	}
	cfg.Receiver.OnRunCanceled = th.runCanceled
	p, err := NewPlugin(r.m, id, cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: Threads: thread %q: %w", id, err)
	}
	th.plugin = p
	if r.cfg.New != nil {
		hook = "New"
		v, err := r.cfg.New(ctx, id, p)
		if err != nil {
			return nil, fmt.Errorf("agent: Threads: thread %q: %w", id, err)
		}
		th.value = v
	}
	return th, nil
}

// Lookup returns the live thread, without holding it (so it may be closed
// at any time after): for a read of its value that does not need the
// thread to stay live, such as a status page. A thread being made or
// closed is not live.
func (r *Threads[T]) Lookup(thread string) (*Thread[T], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	th, ok := r.threads[thread]
	return th, ok
}

// Len returns how many threads are live (made, with their Plugin, not
// being closed), for metrics.
func (r *Threads[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.threads)
}

// Held returns how many live threads are held (acquired and not yet
// released), for metrics: the threads with a request in flight.
func (r *Threads[T]) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Close closes the registry, for a shutdown: Acquire fails with
// bgtask.ErrClosed from now on, every thread nobody holds is closed now,
// on this goroutine (OnClose with CloseShutdown), and each held thread is
// closed at its last Release. Close waits for those, for the threads being
// made or closed, and for the idle timer's goroutine, until ctx ends: it
// returns nil, or ctx's cause when ctx ended first (the held threads are
// still closed at their Release), joined with the errors of the Plugins'
// Close since Close began. It may be called again (to wait again); it
// must not be called from a hook.
//
// The Manager is not stopped. Closing the Plugins before the Manager's
// Stop hands what their tasks report from then on to the Manager (kept in
// memory for the threads' next Plugins; on a durable store the records
// tell the ends after a restart); closing them after, the Plugins still
// hear (OnWake) the ends that the Stop brings.
func (r *Threads[T]) Close(ctx context.Context) error {
	r.mu.Lock()
	var idle []*Thread[T]
	if !r.closed {
		r.closed = true
		close(r.quit)
		for e := r.idle.Front(); e != nil; e = e.Next() {
			idle = append(idle, e.Value.(*Thread[T]))
		}
		for _, th := range idle {
			r.detach(th)
		}
		r.checkDrained()
	}
	r.mu.Unlock()
	for _, th := range idle {
		r.closeThread(th, CloseShutdown)
	}
	select {
	case <-r.drained:
	case <-ctx.Done():
	}
	var cause error
	select {
	case <-r.drained: // drained wins when ctx ended too
		if r.done != nil {
			<-r.done // it returns at quit, or once the threads it closes are closed
		}
	default:
		cause = context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return cause
	}
	return errors.Join(append(slices.Clone(r.errs), cause)...)
}

// hold makes th held once more. r.mu is held.
func (r *Threads[T]) hold(th *Thread[T]) {
	if th.users == 0 {
		if th.idle != nil { // nil for a thread just made
			r.idle.Remove(th.idle)
			th.idle = nil
		}
		r.held++
	}
	th.users++
}

// detach takes th, nobody holding it, out of the live threads into the
// closing ones: from now on an Acquire of its id waits for closeThread.
// r.mu is held.
func (r *Threads[T]) detach(th *Thread[T]) {
	delete(r.threads, th.id)
	if th.idle != nil {
		r.idle.Remove(th.idle)
		th.idle = nil
	}
	r.closing[th.id] = make(chan struct{})
}

// closeThread closes the Plugin of th, which detach took out, calls
// OnClose, then lets th's id be made again. r.mu is not held.
func (r *Threads[T]) closeThread(th *Thread[T], why CloseReason) {
	err := th.plugin.Close(context.Background())
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("agent: Threads: a hook panicked", "hook", "OnClose", "thread", th.id, "panic", v, "stack", string(debug.Stack()))
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil && r.closed {
			r.errs = append(r.errs, fmt.Errorf("agent: Threads: thread %q: %w", th.id, err))
		}
		close(r.closing[th.id])
		delete(r.closing, th.id)
		r.checkDrained()
	}()
	if r.cfg.OnClose != nil {
		r.cfg.OnClose(th, why, err)
	}
}

// checkDrained closes r.drained once Close began and nothing is live, made
// or being closed. r.mu is held.
func (r *Threads[T]) checkDrained() {
	if !r.closed || len(r.threads) > 0 || len(r.making) > 0 || len(r.closing) > 0 {
		return
	}
	select {
	case <-r.drained:
	default:
		close(r.drained)
	}
}
