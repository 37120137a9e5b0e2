package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// A task started by Owner.Foreground is held in the foreground until it is
// promoted or ends; Task.fg says which, and changes only with m.mu held.
const (
	fgBackground int32 = iota // a task like any other (the zero value)
	fgHeld                    // in the foreground: its events and its end are not announced
	fgEnded                   // ended in the foreground: its end went back as the call's result
)

// ForegroundResult is what Owner.Foreground came to. The zero value is
// the result of a call that started no task (Foreground returned an error
// before spawning).
type ForegroundResult struct {
	// TaskID is the task that ran the function, or the owner's existing
	// task that the call's idempotency key named.
	TaskID string
	// Promoted reports that the function was still going after the given
	// time, or when the caller's ctx ended first (unless
	// WithCancelOnAbandon): it goes on as a background task whose end is
	// announced to the owner like any task's.
	Promoted bool
	// Status is the task's status when Foreground returned: its terminal
	// status when it ended in time (completed, or failed or cancelled with
	// the error); when promoted, the status it had then: queued, running
	// or awaiting_input.
	Status bgtype.Status
	// Result is the tool result to give the model: the function's result
	// (JSON) when it completed in time, or the promotion notice, a JSON
	// object that gives the task id and says how to wait for it:
	//
	//	{"status":"promoted","task_id":id,"task_status":s,"message":m}
	Result json.RawMessage
}

// errForegroundTime ends the foreground wait of Owner.Foreground.
var errForegroundTime = errors.New("bgtask: foreground time is up")

// inForeground is the spawn option of Owner.Foreground.
func inForeground(c *spawnConfig) { c.foreground = true }

// WithCancelOnAbandon makes an Owner.Foreground call cancel its task when
// the caller's ctx ends while the call is in the foreground, with the
// reason "foreground call abandoned"; the task's end is then never
// announced. Without it such a call is promoted: the work goes on as a
// background task whose end reaches the owner. Use it for work that is of
// no use without its caller. Spawn and SpawnAgent ignore it.
func WithCancelOnAbandon() SpawnOption { return func(c *spawnConfig) { c.cancelOnAbandon = true } }

// Foreground runs fn as a task of this owner and waits up to d for it, for
// a tool that cannot know in advance whether its work is fast. The task is
// spawned at once with the call's lineage, like Spawn (opts are Spawn's).
//
// If fn returns within d, Foreground returns its result as the tool result
// (Result, Promoted false). Its end is not announced to the owner (the
// model got it directly), and its record is kept like any ended task's:
// list_tasks and get_task show it. While the owner has a run open on this
// Manager (Receiver.RunStart), the end is heard as the run's events are:
// its record is marked announced when the run proves the model answered
// (the next Deliver, RunEnd), and a run aborted and given back
// (Receiver.Undeliver), or a process that dies first, has the end
// announced to the owner's next run as an event, on any instance; with
// no run open it is marked at once. An error fn returned, or a panic, is
// the error, a *TaskError (kind "error" or "panic") as Wait gives it.
//
// Otherwise the call is promoted: Foreground returns the promotion notice
// (Promoted true) and fn goes on, running once and with its context
// untouched; from then on it is a background task like any other: its end,
// its progress and its input requests reach the owner as its wake policy
// says, and a cancel of it cancels fn's context. A task that asks for input
// (Task.RequestInput) is promoted at once: the model must answer it. A
// spawn that waits for a concurrency slot (Limits.QueueWhenFull) counts its
// time queued within d; promoted while queued, it starts when a slot frees.
// Until it is promoted, the events fn emits are kept as its progress only
// (Owner.LatestEvent), not sent to the inbox; messages it sends its owner
// still are. The notice's task_status is the status the task had when it
// was promoted: queued, running or awaiting_input, never a terminal one.
//
// If ctx ends first (in a server, the client hung up), the call is
// abandoned and Foreground returns ctx's cause at once, without waiting
// for fn. By default the call is promoted, as if its time were up: the
// result holds the promotion notice, fn runs on with its context
// untouched, and its end reaches the owner like any background task's (at
// the owner's next run if none is open), because a task outlives the
// request that started it and the work done so far is not lost. If fn
// returned just then, its end is delivered to the owner as an event
// instead of as the call's result. With WithCancelOnAbandon the task is
// cancelled instead, with the reason "foreground call abandoned" (a
// function that ignores its context runs on until it returns), and its end
// is never announced.
//
// With an idempotency key (WithIdempotencyKey) that the owner's existing
// task already has, Foreground starts nothing and joins that task for up
// to d: its end within d is the result (and is then not announced again);
// otherwise the result is the promotion notice of that task, whose end is
// announced like any background task's. A joined task is never cancelled
// by this call, whatever ctx does.
//
// Exactly one of the function's outcome and the promotion is returned,
// whatever the timing: the decision is taken once, under the Manager's
// lock, and a function that has returned wins it (its end is then the
// result, even while its result is still being encoded or recorded as
// the time is up). Foreground is safe for concurrent use. Errors: Spawn's (nothing was started), ErrInvalidArgument for a
// negative d, ctx's cause, a *TaskError for a failed fn, and an error
// matching ErrCanceled when the task was cancelled in the foreground (by
// Shutdown, CancelRun or a cancel of its id). A task whose run is stopped
// (CancelRun, StopRun) while its call waits has its end announced to the
// owner as well, whichever of the call and the turn hears of the stop
// first: the stop ends the call's turn, whose model never reads the
// call's result.
func (o Owner) Foreground(ctx context.Context, d time.Duration, fn Func, opts ...SpawnOption) (ForegroundResult, error) {
	if d < 0 {
		return ForegroundResult{}, invalidArgument("negative foreground time %v", d)
	}
	id, created, err := o.m.spawnTask(ctx, o.id, fn, false, append(opts[:len(opts):len(opts)], inForeground))
	switch {
	case err != nil:
		return ForegroundResult{}, err
	case !created:
		return o.joinForeground(ctx, d, id)
	}
	defer o.m.stopStream(o.id, id) // WithOutputFunc: never called once the call returned
	defer o.m.leaveForeground(o.id, id)
	start := time.Now()
	tctx, stopTimer := context.WithTimeoutCause(ctx, d, errForegroundTime)
	wctx, promote := context.WithCancelCause(tctx)
	o.m.holdForeground(o.id, id, promote)
	meta, err := o.m.waitSettled(wctx, ownerReach(o.id), id)
	timeUp := errors.Is(context.Cause(wctx), errForegroundTime)
	promote(nil)
	stopTimer()
	d = min(time.Since(start), d) // less than d when ToBackground promoted it
	switch {
	case ctx.Err() != nil:
		return o.abandonForeground(ctx, id, min(time.Since(start), d), slices.ContainsFunc(opts, cancelsOnAbandon))
	case err == nil && meta.Status.IsTerminal(): // it ended in the foreground
		o.m.handAnswer(&meta)
		return foregroundEnd(&meta)
	case err != nil && !timeUp:
		return ForegroundResult{TaskID: id}, err
	}
	// Its time is up, or it asks for input: promote it, unless it ended
	// meanwhile.
	if meta, ok := o.m.toBackground(id); ok {
		return o.promoted(&meta, d), nil
	}
	meta, err = o.m.wait(ctx, ownerReach(o.id), id)
	if err != nil {
		return ForegroundResult{TaskID: id}, err
	}
	o.m.handAnswer(&meta)
	return foregroundEnd(&meta)
}

// holdForeground lets Owner.ToBackground end the foreground wait of the
// owner's task id with promote.
func (m *Manager) holdForeground(owner, id string, promote context.CancelCauseFunc) {
	t := m.liveTask(owner, id)
	if t == nil {
		return
	}
	r := t.rareState()
	t.emitMu.Lock()
	r.promote = promote
	asked := r.promoteAsked
	t.emitMu.Unlock()
	if asked {
		promote(errForegroundTime)
	}
}

// ToBackground moves one of the owner's tasks that an Owner.Foreground
// call holds in the foreground to the background now, as if the call's
// time were up: the call returns its promotion notice (with the output so
// far) and the task goes on, its end announced to the owner. It is the
// user's "run this in the background" while a foreground call runs (a
// host's key or button), and what a task may call on itself when it knows
// its work will be long. ok is false, and nothing happens, for a task
// that is not held in the foreground (a background task, one that ended,
// one another process runs); a task whose function returns at that very
// moment ends in the foreground instead. Errors: ErrNotFound for an
// unknown task or another owner's, the Store's.
func (o Owner) ToBackground(ctx context.Context, id string) (bool, error) {
	t := o.m.liveTask(o.id, id)
	if t == nil {
		if _, err := o.Get(ctx, id); err != nil {
			return false, err
		}
		return false, nil
	}
	if t.fg.Load() != fgHeld {
		return false, nil
	}
	r := t.rareState()
	t.emitMu.Lock()
	promote := r.promote
	if promote == nil {
		r.promoteAsked = true // before the call waits: it will not wait
	}
	t.emitMu.Unlock()
	if promote != nil {
		promote(errForegroundTime)
	}
	return true, nil
}

// cancelsOnAbandon reports whether opt is WithCancelOnAbandon's.
func cancelsOnAbandon(opt SpawnOption) bool {
	if opt == nil {
		return false
	}
	var c spawnConfig
	opt(&c)
	return c.cancelOnAbandon
}

// abandonForeground settles a call whose caller's ctx ended after d while
// its task id was in the foreground: cancelled with WithCancelOnAbandon,
// promoted otherwise. It returns ctx's cause.
func (o Owner) abandonForeground(ctx context.Context, id string, d time.Duration, cancel bool) (ForegroundResult, error) {
	cause := context.Cause(ctx)
	if cancel {
		_, _ = o.m.cancelTask(context.WithoutCancel(ctx), ownerReach(o.id), id, false, "foreground call abandoned")
		if _, held := o.m.answers.take(id); held { // it ended just then: never announced either
			if _, err := o.m.wait(context.WithoutCancel(ctx), ownerReach(o.id), id); err == nil { // its end is committed
				_ = o.MarkAnnounced(context.WithoutCancel(ctx), id)
			}
		}
		return ForegroundResult{TaskID: id}, cause
	}
	if meta, ok := o.m.toBackground(id); ok {
		return o.promoted(&meta, d), cause
	}
	// It ended in the foreground just now: nobody takes the call's result
	// any more, so its end goes to the owner as an event: an end held for
	// the call's run (answeredInForeground), its record unannounced, or
	// one marked announced at its commit, with no run open. Not when it
	// ended in the background, promoted at its end by a stop of its run
	// (endForeground): that end is announced already, and its record is
	// neither held nor marked.
	meta, err := o.m.wait(context.WithoutCancel(ctx), ownerReach(o.id), id)
	if err != nil {
		return ForegroundResult{TaskID: id}, cause // an end held for the call: the deferred leaveForeground tries again
	}
	if _, held := o.m.answers.take(id); !held && !meta.Announced {
		return ForegroundResult{TaskID: id}, cause
	}
	o.m.log.Debug("bgtask: task ended as its foreground call was abandoned: its end is announced", "task_id", id, "status", meta.Status)
	o.m.deliverTerminal(&meta)
	return ForegroundResult{TaskID: id, Status: meta.Status}, cause
}

// joinForeground is Foreground for a call whose idempotency key named the
// owner's existing task id: it waits up to d for that task and returns its
// end, or the promotion notice of it. It never cancels the task: another
// call started it.
func (o Owner) joinForeground(ctx context.Context, d time.Duration, id string) (ForegroundResult, error) {
	wctx, stop := context.WithTimeoutCause(ctx, d, errForegroundTime)
	meta, err := o.m.waitSettled(wctx, ownerReach(o.id), id)
	timeUp := errors.Is(context.Cause(wctx), errForegroundTime)
	stop()
	switch {
	case ctx.Err() != nil:
		return ForegroundResult{TaskID: id}, context.Cause(ctx)
	case timeUp:
		if meta, err = o.Get(ctx, id); err != nil {
			return ForegroundResult{TaskID: id}, err
		}
	case err != nil && !errors.Is(err, ErrNotLive):
		return ForegroundResult{TaskID: id}, err
	}
	if meta.Status.IsTerminal() {
		// Its end is the call's result: take its event back (it follows
		// the commit at once) so that it is not announced again.
		if ended, err := o.m.wait(context.WithoutCancel(ctx), ownerReach(o.id), id); err == nil {
			meta = ended
		}
		o.answered(ctx, &meta)
		return foregroundEnd(&meta)
	}
	// Asking for input, still going, or run by another process: a
	// background task already, reported to the owner as any other.
	return o.promoted(&meta, d), nil
}

// toBackground promotes the task id held in the foreground and returns its
// record; false if it is not held any more, or its function has returned
// (it has ended, or is ending: the end wins, and goes back as the call's
// result). From then on it reports to its owner like any task.
func (m *Manager) toBackground(id string) (bgtype.TaskMeta, bool) {
	m.mu.Lock()
	t := m.nodes[id]
	// The task's goroutine claims its end (returned) before it asks for m.mu
	// (endForeground): one that claimed it finds the task still held.
	if t == nil || t.fg.Load() != fgHeld || t.end.Load() == endReturned {
		m.mu.Unlock()
		return bgtype.TaskMeta{}, false
	}
	// Read under the lock: the status the task had when it was promoted.
	// Once the lock is released its end may be committed at once (a
	// function returning as its time is up), and a notice that says
	// "completed" while it tells the model the call goes on is a lie. Read
	// before the task is marked promoted: a task that sees the mark ends
	// without this lock, writing its record (a private one, with a Store
	// other than the in-memory one) at once.
	meta := m.record(t)
	t.fg.Store(fgBackground)
	if t.reports() {
		m.owners[t.rec.Owner].reporting++ // decremented by retire
	}
	if h := whilePromoting.Load(); h != nil {
		(*h)(m, id)
	}
	m.mu.Unlock()
	if h := afterPromote.Load(); h != nil {
		(*h)(m, id)
	}
	return meta, true
}

// whilePromoting, when set (by tests only), runs inside toBackground, under
// m.mu, right after task id of m is marked promoted, so a test can end the
// task while the promotion holds the lock.
var whilePromoting atomic.Pointer[func(m *Manager, id string)]

// afterPromote, when set (by tests only), runs right after toBackground
// has promoted task id of m, so a test can end the task at that very
// moment.
var afterPromote atomic.Pointer[func(m *Manager, id string)]

// endForeground settles, when its function has returned, a task held in the
// foreground: it ends there (true) unless it was promoted first (false).
// A task whose run was stopped (CancelRun, StopRun, a stop asked on
// another instance: its cancel cause is the run's) is promoted now and
// ends in the background, its end announced to the owner: the stop ends
// the turn that holds the call, so no model reads the call's result, and
// the stop cancels the run's tasks before it tells the turn (decision
// 713), so which of the two the call hears first is a race (decision 803).
func (m *Manager) endForeground(t *Task) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.fg.Load() != fgHeld {
		return false
	}
	if errors.Is(context.Cause(t.context()), errRunCanceled) {
		t.fg.Store(fgBackground)
		if t.reports() {
			m.owners[t.rec.Owner].reporting++ // decremented by retire
		}
		return false
	}
	t.fg.Store(fgEnded)
	m.holdAnswer(t)
	return true
}

// wake is the policy that routes t's events: its own, or silent while it is
// held in the foreground (or ended there).
func (t *Task) wake() bgtype.WakePolicy {
	if t.fg.Load() != fgBackground {
		return bgtype.WakeSilent
	}
	return t.rec.WakePolicy()
}

// reports reports whether t's end is announced to its owner.
func (t *Task) reports() bool { return t.wake() != bgtype.WakeSilent }

// foregroundEnd is the result of a call whose task ended in the foreground.
func foregroundEnd(meta *bgtype.TaskMeta) (ForegroundResult, error) {
	res := ForegroundResult{TaskID: meta.ID, Status: meta.Status}
	switch meta.Status {
	case bgtype.StatusCompleted:
		res.Result = meta.Result
		if res.Result == nil {
			res.Result = json.RawMessage("null")
		}
		return res, nil
	case bgtype.StatusCanceled:
		return res, &canceledError{id: meta.ID, text: meta.Error}
	}
	return res, failedError(meta)
}

// cancelledError is the error of a call whose task was cancelled in the
// foreground. It matches ErrCanceled.
type canceledError struct{ id, text string }

func (e *canceledError) Error() string {
	return fmt.Sprintf("bgtask: task %s cancelled: %s", e.id, e.text)
}

func (e *canceledError) Is(target error) bool { return target == ErrCanceled }

// promotionNotice is the tool result of a promoted call.
type promotionNotice struct {
	Status     string        `json:"status"` // "promoted"
	TaskID     string        `json:"task_id"`
	TaskStatus bgtype.Status `json:"task_status"`
	Message    string        `json:"message"`
	Output     *outputView   `json:"output,omitempty"` // the last part of what the call wrote, if anything
}

// outputView is a piece of output as a model is shown it, in the tools'
// shape.
type outputView struct {
	Text         string `json:"text"`
	Offset       int64  `json:"offset"`
	NextOffset   int64  `json:"next_offset"`
	DroppedBytes int64  `json:"dropped_bytes"`
	TotalBytes   int64  `json:"total_bytes"`
}

// promoted is the result of the owner's call promoted after d, with the
// last part of what the task wrote (Task.Output), if anything.
func (o Owner) promoted(meta *bgtype.TaskMeta, d time.Duration) ForegroundResult {
	if out, ok := o.m.outputTail(o.id, meta.ID); ok {
		return promotedWith(meta, d, &out)
	}
	return promotedWith(meta, d, nil)
}

// promoted is the result of a call promoted after d, whose task wrote no
// output.
func promoted(meta *bgtype.TaskMeta, d time.Duration) ForegroundResult {
	return promotedWith(meta, d, nil)
}

// promotedWith is the result of a call promoted after d; out, if not nil,
// is the last part of what its task wrote.
func promotedWith(meta *bgtype.TaskMeta, d time.Duration, out *Output) ForegroundResult {
	var msg string
	switch meta.Status {
	case bgtype.StatusAwaitingInput:
		msg = fmt.Sprintf("The call goes on in the background as task %s, which asks for input: "+
			`get_task shows the request; answer it with send_message (in_reply_to the request id). `, meta.ID)
	case bgtype.StatusQueued:
		msg = fmt.Sprintf("The call was still waiting for a free slot after %v: it goes on in the background as task %s. ", d, meta.ID)
	default:
		msg = fmt.Sprintf("The call was still running after %v: it goes on in the background as task %s. ", d, meta.ID)
	}
	msg += "Its result will be announced when it ends; to wait for it now, call wait_task with this task_id."
	n := promotionNotice{Status: "promoted", TaskID: meta.ID, TaskStatus: meta.Status, Message: msg}
	if out != nil {
		// What the call printed so far is not lost: its last part here, the
		// rest from offset 0, what follows from next_offset.
		n.Output = &outputView{Text: out.Text, Offset: out.Offset, NextOffset: out.NextOffset, TotalBytes: out.Size}
		n.Message += fmt.Sprintf(" output holds the last %d bytes it wrote (from offset %d); read what it writes next with get_task output_since=%d.",
			len(out.Text), out.Offset, out.NextOffset)
	}
	b, _ := json.Marshal(n)
	return ForegroundResult{TaskID: meta.ID, Promoted: true, Status: meta.Status, Result: b}
}
