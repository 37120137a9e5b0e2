package bgtask

import "fmt"

// taskPhase is where a Task is in the Manager's bookkeeping: registration,
// its concurrency slot, its first commit, its goroutine, its end. It is not
// the record's Status (what the Store keeps and the owner sees): a task
// is StatusRunning from its first commit, while its phase moves on from
// phaseAdmitted to phaseRunning once its goroutine is started. Guarded by
// m.mu; run reads it without the lock, before the function is called,
// which is safe because nobody but the task's own goroutine moves it once
// the goroutine is started, except Stop, which ends a task it cut (and
// moves its phase) only after the goroutine marked its function called
// (Task.end, an atomic: the read happens before).
//
//	phaseNew ──► phaseAdmitted ─────────────────────► phaseRunning ──┐
//	    │             ▲                                              │
//	    └──────► phaseWaiting ──► phaseQueued ──────► phaseRunning   │
//	                  │                │                             ▼
//	                  └────────────────┴──► phaseDropped ──────► phaseEnding ──► phaseGone
//
// A task whose first commit fails goes to phaseEnding from where it is
// (abandon): phaseRunning if it was admitted at registration, else
// phaseWaiting, phaseAdmitted or phaseDropped. Whether a cancel was requested is kept
// apart (Task.signalled): it can happen in every live phase and changes
// the phase only of a task without a slot (to phaseDropped).
type taskPhase uint8

const (
	// phaseNew: made by spawn, in no index yet. The zero value.
	phaseNew taskPhase = iota
	// phaseAdmitted: given a slot. A task admitted at registration moves on
	// to phaseRunning in the same critical section (its first record is
	// committed after it, then its goroutine started); one admitted from
	// phaseWaiting is moved on by its spawner after the commit.
	phaseAdmitted
	// phaseWaiting: registered without a slot (queued, Limits.QueueWhenFull);
	// the first record is being committed. A released slot admits it
	// (phaseAdmitted); after the commit the spawner queues it.
	phaseWaiting
	// phaseQueued: in m.queue with its queued record committed; a released
	// slot starts it (phaseRunning).
	phaseQueued
	// phaseRunning: holds a slot; its goroutine is started (or being
	// started by whoever moved it here), after its first record is
	// committed.
	phaseRunning
	// phaseDropped: cancelled before it got a slot. Its goroutine records it
	// cancelled without calling the function (started at once if its
	// record is committed, else by the spawner after the commit).
	phaseDropped
	// phaseEnding: unregistered. It no longer counts for names, limits,
	// runs and cancels; its end is being recorded and delivered, and it is
	// on its owner's ending list unless it is silent.
	phaseEnding
	// phaseGone: retired. Its end is recorded and delivered, its waiters
	// are released; it stays in m.nodes only while attached children live.
	phaseGone
)

var phaseNames = [...]string{"new", "admitted", "waiting", "queued", "running", "dropped", "ending", "gone"}

func (p taskPhase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// phaseMoves[from] has bit to set when from may move to to.
var phaseMoves = [...]uint16{
	phaseNew:      1<<phaseAdmitted | 1<<phaseWaiting,
	phaseAdmitted: 1<<phaseRunning | 1<<phaseEnding,
	phaseWaiting:  1<<phaseAdmitted | 1<<phaseQueued | 1<<phaseDropped | 1<<phaseEnding,
	phaseQueued:   1<<phaseRunning | 1<<phaseDropped,
	phaseRunning:  1 << phaseEnding,
	phaseDropped:  1 << phaseEnding,
	phaseEnding:   1 << phaseGone,
	phaseGone:     0,
}

// canMove reports whether a task may move from p to next.
func (p taskPhase) canMove(next taskPhase) bool {
	return int(p) < len(phaseMoves) && phaseMoves[p]&(1<<next) != 0
}

// live reports whether the task is registered and not yet unregistered: it
// counts for names, limits, runs and cancels.
func (p taskPhase) live() bool { return p >= phaseAdmitted && p <= phaseDropped }

// holdsSlot reports whether the task holds a concurrency slot (or no limit
// applies).
func (p taskPhase) holdsSlot() bool { return p == phaseAdmitted || p == phaseRunning }

// move sets t's phase, which must be allowed from the current one: a move
// that is not is a bug in this package, and panics. Called with m.mu held.
func (t *Task) move(next taskPhase) {
	if !t.phase.canMove(next) {
		panic(fmt.Sprintf("bgtask: task %s: phase %s cannot move to %s", t.rec.ID, t.phase, next))
	}
	if h := t.m.phaseHook; h != nil {
		h(t, t.phase, next)
	}
	t.phase = next
}
