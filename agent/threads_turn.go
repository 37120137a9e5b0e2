package agent

import (
	"container/list"
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// Thread is one live thread of a [Threads]: its Plugin, the host's value,
// and the lock its turns take. [Threads.Acquire] returns it held; the
// holder calls Release once. Its methods are safe for concurrent use; the
// host's value is the host's to guard (a thread's turns run one at a time,
// but Lookup, OnWake and other holders may read it meanwhile).
type Thread[T any] struct {
	r      *Threads[T]
	id     string
	plugin *Plugin
	value  T        // set before the thread is visible, never after
	turn   fifoLock // taken by a turn

	users    int           // holders; guarded by r.mu
	idle     *list.Element // in r.idle while live and nobody holds it; guarded by r.mu
	released time.Time     // at the last Release; guarded by r.mu

	curMu sync.Mutex // guards cur
	cur   *Turn      // the open turn; nil between turns

	wakeMu sync.Mutex     // guards the fields below
	ready  bool           // made: OnWake is called at once
	wakes  []bgtype.Event // arrived while New ran, for OnWake once the thread is made
}

// ID returns the thread's id: its owner on the Manager.
func (th *Thread[T]) ID() string { return th.id }

// Plugin returns the thread's Plugin (closed once the thread is closed).
func (th *Thread[T]) Plugin() *Plugin { return th.plugin }

// Value returns the host's value of the thread, made by ThreadsConfig.New.
func (th *Thread[T]) Value() T { return th.value }

// Release lets go of the thread an Acquire returned. When nobody holds it
// any more it becomes the most recently used idle thread (its IdleTimeout
// starts now); after the registry's Close began it is closed instead, on
// this goroutine (OnClose with CloseShutdown). A Release with no Acquire
// left to match panics, as sync.Mutex's Unlock of an unlocked mutex does.
func (th *Thread[T]) Release() {
	r := th.r
	r.mu.Lock()
	if th.users <= 0 {
		r.mu.Unlock()
		panic(fmt.Sprintf("agent: Thread.Release of %q, which is not held", th.id))
	}
	if th.users--; th.users > 0 {
		r.mu.Unlock()
		return
	}
	r.held--
	if r.closed {
		r.detach(th)
		r.mu.Unlock()
		r.closeThread(th, CloseShutdown)
		return
	}
	th.released = time.Now()
	th.idle = r.idle.PushBack(th)
	first := r.idle.Len() == 1
	r.mu.Unlock()
	if first && r.kick != nil {
		select { // the idle timer had no deadline: this one is its next
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Turn opens a turn of the thread: it waits until no other turn of the
// thread runs (turns run one at a time, in the order their Turn calls
// began waiting), then opens run on the thread's Plugin (Plugin.RunStart).
// The caller holds the thread (Acquire) and ends the turn with Turn.End.
//
// The wait ends with ctx: Turn then returns ctx's cause and holds no turn.
// RunStart runs with ctx's values, not its cancellation: once the turn is
// taken, a caller that leaves does not make the run's start fail halfway.
// The turn's loop runs on Turn.Context, which ends with ctx and when the
// run is stopped.
//
// An error of RunStart is returned unchanged (match it with errors.Is),
// the turn let go: bgtask.ErrRunOpen when a run of the thread is open
// (in a fleet, on another instance; the registry does not retry it),
// bgtask.ErrNoRun for an empty run id, bgtask.ErrClosed, or the Store's.
func (th *Thread[T]) Turn(ctx context.Context, run bgtask.RunInfo) (*Turn, error) {
	if err := th.turn.lock(ctx); err != nil {
		return nil, err
	}
	tctx, stop := context.WithCancelCause(ctx)
	tu := &Turn{run: run.RunID, plugin: th.plugin, lock: &th.turn, ctx: tctx, stop: stop, clear: func(tu *Turn) {
		th.curMu.Lock()
		if th.cur == tu {
			th.cur = nil
		}
		th.curMu.Unlock()
	}}
	th.curMu.Lock()
	th.cur = tu // before RunStart: a stop that comes as the run opens finds it
	th.curMu.Unlock()
	if err := th.plugin.RunStart(context.WithoutCancel(ctx), run); err != nil {
		tu.clear(tu)
		stop(nil)
		th.turn.unlock()
		return nil, err
	}
	return tu, nil
}

// runCanceled is the Plugin's Config.Receiver.OnRunCanceled: a stop of the
// open turn's run, here or on another instance, ends the turn's context.
func (th *Thread[T]) runCanceled(runID, reason string) {
	th.curMu.Lock()
	tu := th.cur
	th.curMu.Unlock()
	if tu != nil && tu.run == runID {
		tu.stop(&bgtask.RunStoppedError{Reason: reason})
	}
}

// Turn is one open turn of a [Thread]: its run is open on the thread's
// Plugin, and no other turn of the thread runs until End. The loop calls
// the Plugin's phases (Thread.Plugin) in between, on Context. Safe for
// concurrent use.
type Turn struct {
	run    string
	plugin *Plugin
	lock   *fifoLock
	ended  atomic.Bool
	ctx    context.Context
	stop   context.CancelCauseFunc
	clear  func(*Turn) // forgets the turn as its thread's open one
}

// RunID returns the id of the turn's run.
func (tu *Turn) RunID() string { return tu.run }

// Context returns the turn's context: the ctx given to Thread.Turn, also
// cancelled when the turn's run is stopped (bgtask.Owner.StopRun or
// CancelRun, on this instance or, in a fleet, on another one), with a
// *bgtask.RunStoppedError as its cause (bgtask.RunStopped reports true;
// the error carries the stop's reason), and when the turn ends. The loop
// makes its model calls with it, and ends the turn with
// RunOutcome.Canceled set from bgtask.RunStopped(turn.Context()).
func (tu *Turn) Context() context.Context { return tu.ctx }

// End ends the turn's run (Plugin.RunEnd with out; out.RunID may be left
// empty for the turn's run) and lets the thread's next turn in. It does
// not depend on ctx's end (see Plugin.RunEnd). Errors: RunEnd's, after
// which the turn is over all the same; an error matching bgtask.ErrNoRun
// when out.RunID names another run, or the turn already ended: then
// nothing changes.
func (tu *Turn) End(ctx context.Context, out bgtask.RunOutcome) error {
	if out.RunID != "" && out.RunID != tu.run {
		return fmt.Errorf("agent: Turn.End: run %q, the turn's is %q: %w", out.RunID, tu.run, bgtask.ErrNoRun)
	}
	if tu.ended.Swap(true) {
		return fmt.Errorf("agent: Turn.End: the turn of run %q already ended: %w", tu.run, bgtask.ErrNoRun)
	}
	out.RunID = tu.run
	tu.clear(tu)
	defer tu.stop(nil)
	defer tu.lock.unlock() // even if RunEnd panics: a thread's turns never stay locked
	return tu.plugin.RunEnd(ctx, out)
}

// wake is the Plugin's Config.Receiver.OnWake: OnWake once the thread is
// made, kept until then.
func (th *Thread[T]) wake(ev bgtype.Event) {
	th.wakeMu.Lock()
	if !th.ready {
		th.wakes = append(th.wakes, ev)
		th.wakeMu.Unlock()
		return
	}
	th.wakeMu.Unlock()
	th.r.cfg.OnWake(th, ev)
}

// flushWakes hands OnWake the events that arrived while the thread was
// made, in order, then lets wake call it directly.
func (th *Thread[T]) flushWakes() {
	if th.r.cfg.OnWake == nil {
		return
	}
	for {
		th.wakeMu.Lock()
		evs := th.wakes
		th.wakes = nil
		if len(evs) == 0 {
			th.ready = true
			th.wakeMu.Unlock()
			return
		}
		th.wakeMu.Unlock()
		for _, ev := range evs {
			th.callOnWake(ev)
		}
	}
}

// callOnWake calls OnWake on the Acquire's goroutine, which holds the
// thread: a panic is logged, as the Manager does for the calls it makes.
func (th *Thread[T]) callOnWake(ev bgtype.Event) {
	defer func() {
		if v := recover(); v != nil {
			th.r.log.Error("agent: Threads: a hook panicked", "hook", "OnWake", "thread", th.id, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	th.r.cfg.OnWake(th, ev)
}

// fifoLock is a mutex whose waiters give up when their context ends and
// get it in the order they began waiting. The zero value is unlocked.
type fifoLock struct {
	mu      sync.Mutex // guards the fields below
	busy    bool
	waiters list.List // of chan struct{}, closed to hand the lock over
}

// lock takes l, or returns ctx's cause without it.
func (l *fifoLock) lock(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	if !l.busy {
		l.busy = true
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	e := l.waiters.PushBack(ch)
	l.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	select {
	case <-ch: // handed over as ctx ended: pass it on
		l.mu.Unlock()
		l.unlock()
	default:
		l.waiters.Remove(e)
		l.mu.Unlock()
	}
	return context.Cause(ctx)
}

// unlock hands l to its first waiter, or frees it.
func (l *fifoLock) unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.busy {
		panic("agent: unlock of an unlocked turn")
	}
	if e := l.waiters.Front(); e != nil {
		l.waiters.Remove(e)
		close(e.Value.(chan struct{}))
		return
	}
	l.busy = false
}
