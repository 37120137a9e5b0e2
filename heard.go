package bgtask

import (
	"context"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
)

// When an owner has heard an event. A Receiver hands events out at a step
// boundary (Deliver); the model hears them in the model call that follows,
// and that is proven only by what comes after it: the loop's next step
// (the next Deliver), or a run that ends with the model's answer (RunEnd
// without Aborted). Until then the events are unheard: kept by the
// Receiver (unheard), their records not marked announced. A crash, or a
// Close, before the proof hands them out again to the owner's next run;
// nothing marked heard was not handed to a model call that completed.

// hearing is what a Receiver handed out and has not marked heard: most
// owners are idle, so a Receiver holds it only while it is not empty.
type hearing struct {
	unheard  []bgtype.Event // handed out, not yet proven heard
	answers  []bgtype.Event // ends the run's calls returned as results since the last Deliver: the next model call hears them (answer.go)
	carried  bool           // unheard came from an aborted run: the next Deliver proves nothing
	run      string         // that aborted run, whose lease in a RunLeaser store carries them too
	unmarked []string       // tasks proven heard whose announcement mark could not be committed
}

// has reports whether the terminal event of task id was handed out and is
// not marked heard yet; false for a nil h.
func (h *hearing) has(id string) bool {
	if h == nil {
		return false
	}
	end := func(ev bgtype.Event) bool { return ev.TaskID == id && ev.Kind.IsTerminal() }
	return slices.Contains(h.unmarked, id) || slices.ContainsFunc(h.unheard, end) || slices.ContainsFunc(h.answers, end)
}

// answersHeardNext moves the ends the run's calls returned since the last
// Deliver among what was handed out: the model call that follows this
// boundary hears them, and the boundary after it proves it. Called with
// r.mu held, after the boundary's own marks.
func (r *Receiver) answersHeardNext() {
	if h := r.heard; h != nil && len(h.answers) > 0 {
		h.unheard = append(h.unheard, h.answers...)
		h.answers = nil
	}
}

// markHeard marks heard what the Receiver handed out and the loop has
// since shown the model: the terminal events among unheard are marked
// announced, with the marks a previous boundary could not commit, in one
// Commit (and one per other owner of forwarded records), none when there
// is nothing to mark. When it fails the marks are retried at the next
// boundary. The answers returned since the last boundary stay (no model
// call has heard them yet). Called with r.mu held.
func (r *Receiver) markHeard(ctx context.Context) {
	h := r.heard
	if h == nil {
		return
	}
	r.heard = nil
	if len(h.answers) > 0 {
		r.heard = &hearing{answers: h.answers}
	}
	ids := h.unmarked
	for i := range h.unheard {
		if h.unheard[i].Kind.IsTerminal() {
			ids = append(ids, h.unheard[i].TaskID)
		}
	}
	if len(ids) == 0 {
		return
	}
	if err := r.owner.MarkAnnounced(ctx, ids...); err != nil {
		r.owner.m.log.Warn("bgtask: receiver: announcement marks not committed; retried at the next boundary", "owner", r.owner.id, "tasks", len(ids), "err", err)
		if r.heard == nil {
			r.heard = new(hearing)
		}
		r.heard.unmarked = ids
	}
}

// dropHeardElsewhere drops from evs the ends whose records say they were
// announced already: with a SharedStore another instance serves the owner
// too, and its run may have handed out, from the record, an end this
// process still held in memory. The store decides what the owner heard.
// The dropped ends are forgotten here (they are marked). Called with r.mu
// held.
func (r *Receiver) dropHeardElsewhere(ctx context.Context, evs []bgtype.Event) []bgtype.Event {
	var heard []string
	evs = slices.DeleteFunc(evs, func(ev bgtype.Event) bool {
		if !ev.Kind.IsTerminal() {
			return false
		}
		meta, err := r.owner.m.store.Get(ctx, ev.TaskID)
		if err != nil || !meta.Announced {
			return false // not known to be heard: hand it out
		}
		heard = append(heard, ev.TaskID)
		return true
	})
	if len(heard) > 0 {
		r.owner.m.sent.done(r.owner.id, heard)
		r.owner.m.log.Debug("bgtask: receiver: ends another instance announced dropped", "owner", r.owner.id, "tasks", len(heard))
	}
	return evs
}

// Undeliver gives back the events handed out since the last proof that
// the model heard them (see RunOutcome.Aborted): the next Deliver, of this
// run or the owner's next one, hands them out again, first, in their
// order. A host calls it when the events it was handed never reached a
// model call whose answer it keeps: the call failed and the host drops
// the turn's conversation. It returns how many events it gave back;
// ErrNoRun outside a run. Safe for concurrent use.
func (r *Receiver) Undeliver() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running.Load() {
		return 0, ErrNoRun
	}
	return r.giveBack(), nil
}

// giveBack puts the unheard events, and the answers returned since the
// last Deliver, back in front of the events kept for the next Deliver and
// returns how many; marks not committed stay. Called with r.mu held.
func (r *Receiver) giveBack() int {
	h := r.heard
	if h == nil || len(h.unheard)+len(h.answers) == 0 {
		return 0
	}
	evs := append(h.unheard, h.answers...)
	h.unheard, h.answers, h.carried = nil, nil, false
	if len(h.unmarked) == 0 {
		r.heard = nil
	}
	for i := range evs {
		if evs[i].Kind.IsTerminal() {
			delete(r.drained, evs[i].TaskID)
		}
	}
	r.lateMu.Lock()
	r.late.evs = append(evs, r.late.evs...)
	r.lateMu.Unlock()
	return len(evs)
}
