// Package reduce holds the record rules of the one reducer every store
// applies (store.Apply): how an update merges into a stored record. The
// in-memory store calls them on its compact records directly.
package reduce

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// SettleNew makes a record new to a store follow the rules of store.Apply:
// an input request only while awaiting_input, and the stamps its status
// calls for taken from at when it has none.
func SettleNew(m *bgtype.TaskMeta, at time.Time) {
	switch {
	case m.Input == nil:
		m.MoreInput = nil
	case m.Status.IsTerminal():
		m.Input, m.MoreInput = nil, nil
	default:
		m.Status = bgtype.StatusAwaitingInput
	}
	m.Announced = m.Announced && m.Status.IsTerminal()
	stamp(m, m, at)
}

// MergeUpsert applies a valid update u to the stored record cur, in place,
// and reports whether it did; a dropped update leaves cur as it was. The
// rules are the table of store.Apply. Records travel by pointer: they are
// large, and this runs on every task's goroutine, whose stack starts small.
func MergeUpsert(cur, u *bgtype.TaskMeta, at time.Time) bool {
	if u.Owner != cur.Owner || u.Attempt < cur.Attempt ||
		u.Status != "" && u.Status.Rank() < cur.Status.Rank() && !requeue(cur, u) {
		return false
	}
	if cur.Resume != nil && !kindWrite(cur, u) {
		return false
	}
	if cur.Status.IsTerminal() {
		if u.Status != "" && u.Status != cur.Status {
			return false // lost a race against the end: its content must not land
		}
		enrich(cur, u)
		stamp(cur, u, at)
		return true
	}
	// Identity fields (Owner, Type, Name, Parent, Detached, Wake, Tags, IdempotencyKey) are not
	// copied: they are set once, at insert. Assigning field by field keeps
	// this frame small; it runs on every task's goroutine.
	next := u.Status
	if u.Status == "" {
		next = cur.Status
		setIf(&cur.Description, u.Description)
		setIf(&cur.Error, u.Error)
		setIf(&cur.Stack, u.Stack)
		setIf((*string)(&cur.ErrorKind), string(u.ErrorKind))
		setIf(&cur.CancelReason, u.CancelReason)
		setIf(&cur.Instance, u.Instance)
		if u.OutputBytes != 0 {
			cur.OutputBytes = u.OutputBytes
		}
		if u.Result != nil {
			cur.Result = json.RawMessage(bytes.Clone(u.Result))
		}
	} else {
		cur.Description, cur.Error, cur.Stack, cur.ErrorKind = u.Description, u.Error, u.Stack, u.ErrorKind
		cur.CancelReason = u.CancelReason
		cur.Result = json.RawMessage(bytes.Clone(u.Result))
		cur.Instance = u.Instance
		cur.OutputBytes = u.OutputBytes
	}
	if u.Input != nil && !next.IsTerminal() {
		next = bgtype.StatusAwaitingInput // asking for input is waiting for it
	}
	if u.Announced && next.IsTerminal() {
		cur.Announced = true // ended and announced at once (an answer given in the foreground)
	}
	mergeProgress(cur, u)
	if cur.Resume != nil && u.Resume != nil {
		mergeResume(cur, u)
	}
	cur.Status, cur.Attempt = next, u.Attempt
	switch {
	case next != bgtype.StatusAwaitingInput:
		cur.Input, cur.MoreInput = nil, nil // leaving awaiting_input clears the requests
	case u.Input != nil: // the open requests, as a whole
		in := *u.Input
		cur.Input, cur.MoreInput = &in, slices.Clone(u.MoreInput)
	}
	stamp(cur, u, at)
	return true
}

// requeue reports whether u puts the live record of a resumable task back
// in the queue: a new attempt (a higher Attempt) that another instance may
// claim. Only a kind's record may go back; a closure's never does.
func requeue(cur, u *bgtype.TaskMeta) bool {
	return cur.Resume != nil && u.Status == bgtype.StatusQueued && !cur.Status.IsTerminal() && u.Attempt > cur.Attempt
}

// kindWrite reports whether u may land on cur, the record of a resumable
// task: an attempt belongs to the one instance that claimed it, so a
// write of the same attempt by another instance (a second claimer that
// lost the race, or its late writes) is dropped. A write of a higher
// attempt (a requeue, a reaper's end, a cancel between attempts) and one
// that names no instance are not this rule's to drop, but an end that
// names none (decided while the task waited in the queue) lands only while
// no instance claimed it.
func kindWrite(cur, u *bgtype.TaskMeta) bool {
	if u.Status.IsTerminal() && u.Instance == "" && cur.Instance != "" {
		return false // an end decided while it waited (a cancel between attempts) lost to a claim
	}
	return u.Attempt > cur.Attempt || u.Instance == "" || cur.Instance == "" || u.Instance == cur.Instance
}

// mergeResume takes the mutable fields of u's Resume into cur's, a live
// kind record's: the checkpoint and the attempt counts. Kind, Spec and
// MaxAttempts (and Ask) are set at insert and never changed. It makes a new Resume:
// a record's is never changed in place (the in-memory store shares it).
func mergeResume(cur, u *bgtype.TaskMeta) {
	r := cur.Resume.Clone()
	if !u.Resume.SavedAt.Before(r.SavedAt) { // a checkpoint never goes back in time (a write that read the record before a save)
		r.Checkpoint, r.SavedAt, r.SavedBy = json.RawMessage(bytes.Clone(u.Resume.Checkpoint)), u.Resume.SavedAt, u.Resume.SavedBy
		if u.Resume.Checkpoint == nil {
			r.Checkpoint = nil
		}
	}
	r.Yields = max(r.Yields, u.Resume.Yields)
	r.Rounds = max(r.Rounds, u.Resume.Rounds) // the owner's grants never go back
	r.QueuedAt, r.ResumedAt, r.LastError = u.Resume.QueuedAt, u.Resume.ResumedAt, u.Resume.LastError
	cur.Resume = r
}

// enrich fills a terminal record cur from a same-status or status-less
// update u: only what the record lacks is filled.
func enrich(cur, u *bgtype.TaskMeta) {
	if cur.Description == "" {
		cur.Description = u.Description
	}
	if cur.Error == "" && cur.Stack == "" {
		cur.Error, cur.Stack = u.Error, u.Stack
	}
	if cur.ErrorKind == "" {
		cur.ErrorKind = u.ErrorKind
	}
	if cur.CancelReason == "" {
		cur.CancelReason = u.CancelReason
	}
	if cur.Result == nil {
		cur.Result = json.RawMessage(bytes.Clone(u.Result))
	}
	if cur.Instance == "" {
		cur.Instance = u.Instance
	}
	if cur.OutputBytes == 0 {
		cur.OutputBytes = u.OutputBytes
	}
	if cur.Progress == nil && u.Progress != nil {
		p := *u.Progress
		cur.Progress = &p
	}
	cur.Announced = cur.Announced || u.Announced
}

// mergeProgress takes u's progress into the live record cur unless u has
// none or it is older than cur's: progress never goes back in time.
func mergeProgress(cur, u *bgtype.TaskMeta) {
	if u.Progress == nil || cur.Progress != nil && u.Progress.At.Before(cur.Progress.At) {
		return
	}
	p := *u.Progress
	cur.Progress = &p
}

// stamp fills the times cur lacks from u, else from at where cur's status
// calls for them. A time once set is never changed.
func stamp(cur, u *bgtype.TaskMeta, at time.Time) {
	fill(&cur.CreatedAt, u.CreatedAt, at)
	switch {
	case !cur.StartedAt.IsZero():
	case cur.Status == bgtype.StatusQueued:
		cur.StartedAt = u.StartedAt
	default:
		fill(&cur.StartedAt, u.StartedAt, at)
	}
	if cur.Status.IsTerminal() {
		fill(&cur.FinishedAt, u.FinishedAt, at)
	}
}

// fill sets a zero *t to the first non-zero of from and at.
func fill(t *time.Time, from, at time.Time) {
	switch {
	case !t.IsZero():
	case !from.IsZero():
		*t = from
	default:
		*t = at
	}
}

// setIf sets *dst to v when v is not empty.
func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}
