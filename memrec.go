package bgtask

import (
	"encoding/json"
	"math"
	"time"
)

// memRec is a terminal record of a MemoryStore in compact form: what
// retention keeps of a finished task. Times are Unix nanoseconds, the
// status a small code, and the fields most records leave empty live in
// memRare, allocated only when one of them is set. The id string is the
// one the store's map is keyed by, not a copy. compactMeta and expand
// convert from and to a TaskMeta; TestMemRecRoundTrip checks, field by
// field through reflection, that nothing is lost on the way.
type memRec struct {
	id, owner, instance        string // instance: the same string in every record of a Manager
	result                     json.RawMessage
	created, started, finished int64 // Unix nanoseconds; memNoTime for the zero time
	at                         int64 // Unix nanoseconds of the commit that made it terminal, by the store's clock
	status                     uint8 // an index into memStatuses
	wake                       uint8 // an index into memWakes; memOtherWake: in rare
	typ                        uint8 // an index into memTypes; memOtherType: in rare
	detached, announced        bool
	noTags                     bool // Tags is empty but not nil
	rare                       *memRare
}

// memRare holds the fields of a terminal record that most records leave
// empty.
type memRare struct {
	name, description, errText, cancelReason, stack, key string
	errorKind                                            ErrorKind
	wake                                                 WakePolicy // a policy memWakes does not list
	typ                                                  string     // a type memTypes does not list
	parent                                               Parent
	attempt                                              int64
	input                                                *InputRequest
	tags                                                 []string
	progress                                             *TaskProgress
}

// memDone is a terminal record and its place in the store's lists: one
// allocation (168 bytes, in the 176-byte size class).
type memDone struct {
	e   memEntry
	rec memRec
}

// memNoTime stands for the zero time.Time in a memRec.
const memNoTime = math.MinInt64

// memStatuses are the statuses a memRec codes, by code.
var memStatuses = [...]TaskStatus{"", StatusQueued, StatusRunning, StatusAwaitingInput,
	StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted}

// memWakes are the wake policies a memRec codes, by code.
var memWakes = [...]WakePolicy{"", WakeSilent, WakeOnTerminal, WakeOnActivity}

// memOtherWake is the code of a wake policy memWakes does not list.
const memOtherWake = 0xff

// memTypes are the task types a memRec codes, by code.
var memTypes = [...]string{"", TypeTask, TypeSubAgent}

// memOtherType is the code of a task type memTypes does not list.
const memOtherType = 0xff

func memTypeCode(typ string) uint8 {
	for i, x := range memTypes {
		if x == typ {
			return uint8(i)
		}
	}
	return memOtherType
}

func memWakeCode(w WakePolicy) uint8 {
	for i, x := range memWakes {
		if x == w {
			return uint8(i)
		}
	}
	return memOtherWake
}

func memStatusCode(st TaskStatus) uint8 {
	for i, s := range memStatuses {
		if s == st {
			return uint8(i)
		}
	}
	panic("bgtask: MemoryStore: unknown status " + string(st)) // records are validated before they are stored
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return memNoTime
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == memNoTime {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// takeDone returns an empty compact entry: one that retention forgot
// (memTerm.pool), or a new one.
func (t *memTerm) takeDone() *memEntry {
	if e, _ := t.pool.Get().(*memEntry); e != nil {
		return e
	}
	d := new(memDone)
	d.e.rec = &d.rec
	return &d.e
}

// recycle hands e, a compact entry the store no longer reaches, to the
// next record that turns terminal.
func (t *memTerm) recycle(e *memEntry) {
	*e.rec = memRec{} // let go of its strings and result now
	t.pool.Put(e)
}

// newDone returns the compact form of m, a terminal record, as an entry
// on no list, in e when given (taken before the caller took its lock).
// id is m.ID, passed separately so that the caller can share the string
// the store's map holds.
func newDone(t *memTerm, e *memEntry, id string, m *TaskMeta) *memEntry {
	if e == nil {
		e = t.takeDone()
	}
	e.rec.set(m)
	e.rec.id = id
	return e
}

// set writes m into r, keeping r's place in the store (at). The
// result and slices are shared with m, not copied.
func (r *memRec) set(m *TaskMeta) {
	*r = memRec{
		id: m.ID, owner: m.Owner, instance: m.Instance, result: m.Result, typ: memTypeCode(m.Type),
		created: unixNanos(m.CreatedAt), started: unixNanos(m.StartedAt), finished: unixNanos(m.FinishedAt),
		at: r.at, status: memStatusCode(m.Status), wake: memWakeCode(m.Wake),
		detached: m.Detached, announced: m.Announced, noTags: m.Tags != nil && len(m.Tags) == 0,
	}
	tags := m.Tags
	if r.noTags {
		tags = nil
	}
	if m.Name != "" || m.Description != "" || m.Error != "" || m.CancelReason != "" ||
		m.Stack != "" || m.IdempotencyKey != "" || m.ErrorKind != "" || r.wake == memOtherWake || r.typ == memOtherType ||
		m.Parent.TaskID != "" || m.Parent.RunID != "" || m.Parent.CallID != "" || m.Parent.AgentID != "" || m.Attempt != 0 || m.Input != nil || tags != nil || m.Progress != nil {
		r.setRare(m, tags)
	}
}

// setRare keeps the rarely set fields of m in r.rare. Out of line: set runs
// on the task's goroutine, whose frames stay small (docs/internals.md).
//
//go:noinline
func (r *memRec) setRare(m *TaskMeta, tags []string) {
	x := &memRare{
		name: m.Name, description: m.Description, errText: m.Error, cancelReason: m.CancelReason,
		stack: m.Stack, key: m.IdempotencyKey, errorKind: m.ErrorKind,
		parent: m.Parent, attempt: m.Attempt, input: m.Input, tags: tags, progress: m.Progress,
	}
	if r.wake == memOtherWake {
		x.wake = m.Wake
	}
	if r.typ == memOtherType {
		x.typ = m.Type
	}
	r.rare = x
}

// enrich is mergeUpsert of u on the terminal record r, in place. Out of
// line: its frame holds a whole TaskMeta.
//
//go:noinline
func (r *memRec) enrich(u *TaskMeta, at time.Time) {
	m := r.expand()
	if mergeUpsert(&m, u, at) {
		r.set(&m)
	}
}

// expand returns the record r holds, sharing its result and slices (use
// cloneMeta before handing it out).
func (r *memRec) expand() TaskMeta {
	m := TaskMeta{
		ID: r.id, Owner: r.owner, Instance: r.instance, Result: r.result,
		CreatedAt: fromNanos(r.created), StartedAt: fromNanos(r.started), FinishedAt: fromNanos(r.finished),
		Status: memStatuses[r.status], Detached: r.detached, Announced: r.announced,
	}
	if r.wake != memOtherWake {
		m.Wake = memWakes[r.wake]
	}
	if r.typ != memOtherType {
		m.Type = memTypes[r.typ]
	}
	if r.noTags {
		m.Tags = []string{}
	}
	if x := r.rare; x != nil {
		m.Name, m.Description, m.Error, m.CancelReason = x.name, x.description, x.errText, x.cancelReason
		m.Stack, m.IdempotencyKey, m.ErrorKind = x.stack, x.key, x.errorKind
		if r.wake == memOtherWake {
			m.Wake = x.wake
		}
		if r.typ == memOtherType {
			m.Type = x.typ
		}
		m.Parent, m.Attempt, m.Input, m.Progress = x.parent, x.attempt, x.input, x.progress
		if !r.noTags {
			m.Tags = x.tags
		}
	}
	return m
}

func (r *memRec) key() string {
	if r.rare == nil {
		return ""
	}
	return r.rare.key
}
