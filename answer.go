package bgtask

import (
	"context"
	"sync"

	"github.com/bgtask/bgtask/bgtype"
)

// Answers: a task's end that a call returned to the model as its result
// (a task that ended in the foreground, wait_task, a joined Foreground,
// MarkAnswered) is heard as an event handed out by Deliver is, when the
// model's answer is kept (heard.go), not when the call returns: while its
// owner has a run open on this Manager, the end joins what the Receiver
// handed out and is marked announced at the run's next proof. A run that
// ends aborted carries it, Undeliver (a host that drops the conversation)
// gives it back as the task's terminal event for the next Deliver, and a
// process that dies first leaves the record unannounced, so the owner's
// next run, on any instance, announces it (decision 804). With no run
// open (a host that reads an Inbox itself) the end is marked at once, as
// before.

// heldAnswers are the foreground ends committed unannounced for the call
// that holds them, until the call hands them to its run (or, abandoned,
// to the owner as events).
type heldAnswers struct {
	mu  sync.Mutex        // guards ids
	ids map[string]uint64 // the run each end is held for (Receiver.runSeq); nil when none
}

// hold records that the end of task id waits for its call, in run.
func (h *heldAnswers) hold(id string, run uint64) {
	h.mu.Lock()
	if h.ids == nil {
		h.ids = make(map[string]uint64)
	}
	h.ids[id] = run
	h.mu.Unlock()
}

// take reports whether the end of task id was held, and for which run,
// and lets go of it.
func (h *heldAnswers) take(id string) (run uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if run, ok = h.ids[id]; !ok {
		return 0, false
	}
	delete(h.ids, id)
	if len(h.ids) == 0 {
		h.ids = nil // a map keeps its memory
	}
	return run, true
}

// openReceiver returns owner's live Receiver on m (a sub-agent's too) if
// a run of it is open, else nil.
func (m *Manager) openReceiver(owner string) *Receiver {
	if r := m.receiverOf(owner); r != nil && r.Running() {
		return r
	}
	return nil
}

// holdAnswer decides, as t ends in the foreground (endForeground, with
// m.mu held), whether its end is held for the call that holds it: while
// the call waits and the owner has a run open, its record stays
// unannounced and the call hands the end to that run (handAnswer); a call
// gone already (an abandoned one whose task ends later) takes nothing, and
// a silent task's end is never announced.
func (m *Manager) holdAnswer(t *Task) {
	if r := t.rare.Load(); r != nil && r.callGone || t.rec.WakePolicy() == bgtype.WakeSilent {
		return
	}
	r := m.openReceiver(t.rec.Owner)
	if r == nil {
		return
	}
	m.answers.hold(t.rec.ID, r.runSeq.Load())
	t.rareState().answerHeld = true
}

// answeredInForeground sets, before it is committed, how the terminal
// record u of t, which ended in the foreground, is heard: its end goes
// back as the call's result, never as an event. Held for the call's run
// (holdAnswer), the record stays unannounced; otherwise it is marked
// announced now.
func (m *Manager) answeredInForeground(t *Task, u *bgtype.TaskMeta) {
	if r := t.rare.Load(); r != nil && r.answerHeld {
		if m.durable() {
			m.sent.add(u.Owner, u.Owner, u.ID) // before the commit, as a background end: a Restore must not announce it too
		}
		return
	}
	u.Announced = true // a restart must not announce it
	m.log.Debug("bgtask: task ended in the foreground, not announced", "task_id", u.ID, "status", u.Status)
}

// handAnswer is called by the Foreground call that returns meta, the end
// of its task, as its result: an end held for it is handed to the run it
// was held for, as heard by the model once the run proves it; if that run
// ended meanwhile (another may be open: its model never read the call),
// the end goes to the owner as an event.
func (m *Manager) handAnswer(meta *bgtype.TaskMeta) {
	run, ok := m.answers.take(meta.ID)
	if !ok {
		return
	}
	if r := m.openReceiver(meta.Owner); r != nil && r.handOut(meta, run) {
		return
	}
	m.deliverTerminal(meta)
}

// leaveForeground is deferred by the Foreground call of the owner's task
// id: from now on no end of it is held for the call (holdAnswer), and an
// end still held when it returns (the call failed after the task ended,
// without returning the end) goes to the owner as an event.
func (m *Manager) leaveForeground(owner, id string) {
	m.mu.Lock()
	if t := m.nodes[id]; t != nil {
		t.rareState().callGone = true
	}
	m.mu.Unlock()
	if _, ok := m.answers.take(id); !ok {
		return
	}
	if meta, err := m.wait(context.Background(), ownerReach(owner), id); err == nil {
		m.deliverTerminal(&meta)
	}
}

// handOut adds the end meta, given to the model as a call's result, to
// what the open run handed out and has not proven heard; false, changing
// nothing, when no run is open, or when run (a runSeq; 0 for the open
// one) is not the open one. An end handed out already stays as it is.
func (r *Receiver) handOut(meta *bgtype.TaskMeta, run uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running.Load() || run != 0 && run != r.runSeq.Load() {
		return false
	}
	if _, handed := r.drained[meta.ID]; handed || r.heard.has(meta.ID) {
		return true
	}
	if r.heard == nil {
		r.heard = new(hearing)
	}
	r.heard.answers = append(r.heard.answers, terminalEvent(meta)) // the next model call hears it
	r.owner.m.noteDelivered(r.owner.id, meta.Owner, meta.ID)       // a Restore must not announce it too (a task of another instance)
	if r.drained == nil {
		r.drained = make(map[string]struct{})
	}
	r.drained[meta.ID] = struct{}{}
	return true
}

// answered is called when a call returned the terminal record meta to the
// model as its result (wait_task, or Owner.Foreground joining a task that
// another call started): the owner must not hear of that end a second
// time. The task's terminal event, if it still waits in the owner's inbox,
// is taken out. While the owner has a run open the end joins what the run
// handed out, marked announced once the run proves the model heard it;
// otherwise the record is marked announced now, so neither the next step
// boundary nor a restart announces it again. An event that a Receiver
// keeps between runs is not reached; a mark that cannot be committed is
// logged, and a restart may then announce the end once more.
func (o Owner) answered(ctx context.Context, meta *bgtype.TaskMeta) {
	if !meta.Status.IsTerminal() || meta.Wake == bgtype.WakeSilent || meta.Announced {
		return
	}
	o.m.inboxMu.RLock()
	ib := o.m.inboxes[meta.Owner]
	o.m.inboxMu.RUnlock()
	if ib != nil {
		ib.takeTerminal(meta.ID)
	}
	if r := o.m.openReceiver(meta.Owner); r != nil && r.handOut(meta, 0) {
		return
	}
	if err := o.MarkAnnounced(context.WithoutCancel(ctx), meta.ID); err != nil {
		o.m.log.Warn("bgtask: a task's end given as a tool result not marked announced", "task_id", meta.ID, "err", err)
		return
	}
	meta.Announced = true
}
