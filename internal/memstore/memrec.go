package memstore

import (
	"encoding/json"
	"math"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/reduce"
)

// Rec is a record of an in-memory store in compact form, live or terminal
// (a Task keeps its own record in this form too, see record.go). Times are
// Unix nanoseconds, the status a small code, and the fields most records
// leave empty live in two side structs, allocated only when one of their
// fields is set: ident for the identity fields, set before the record is
// shared and never changed after (a Manager reads them without a lock, and
// a record that turns terminal shares them with its live form), rare for
// the others. The id string is the one the store's map is keyed by, not a
// copy. set and expand convert from and to a TaskMeta; TestMemRecRoundTrip
// checks, field by field through reflection, that nothing is lost.
type Rec struct {
	ID, Owner, instance        string // instance: the same string in every record of a Manager
	result                     json.RawMessage
	created, started, finished int64 // Unix nanoseconds; memNoTime for the zero time
	at                         int64 // Unix nanoseconds of the commit that made it terminal, by the store's clock
	status                     uint8 // an index into memStatuses
	wake                       uint8 // an index into memWakes; memOtherWake: in ident (identity)
	typ                        uint8 // an index into memTypes; memOtherType: in ident (identity)
	Detached                   bool  // identity
	announced                  bool
	noTags                     bool // Tags is empty but not nil (identity)
	held                       bool // its shard's byID names this very entry; under the shard's lock
	ident                      *memIdent
	rare                       *memRare
}

// memIdent holds the identity fields of a record that most records leave
// empty. It is never changed once its record is shared: a record that
// changes them (a reducer never does) gets a new one.
type memIdent struct {
	name, key string
	wake      bgtype.WakePolicy // a policy memWakes does not list
	typ       string            // a type memTypes does not list
	parent    bgtype.Parent
	tags      []string
}

// memRare holds the other fields of a record that most records leave
// empty. It is never changed once set: a change makes a new one.
type memRare struct {
	description, errText, cancelReason, stack string
	errorKind                                 bgtype.ErrorKind
	attempt                                   int64
	input                                     *bgtype.InputRequest
	moreInput                                 []bgtype.InputRequest
	progress                                  *bgtype.Progress
	resume                                    *bgtype.Resume // a kind's; never changed once set (a change makes a new one)
	outputBytes                               int64          // set at the end of a task that wrote output
}

// memNoTime stands for the zero time.Time in a memRec.
const memNoTime = math.MinInt64

// memStatuses are the statuses a memRec codes, by code.
var memStatuses = [...]bgtype.Status{"", bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput,
	bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted}

// memWakes are the wake policies a memRec codes, by code.
var memWakes = [...]bgtype.WakePolicy{"", bgtype.WakeSilent, bgtype.WakeOnTerminal, bgtype.WakeOnActivity}

// memOtherWake is the code of a wake policy memWakes does not list.
const memOtherWake = 0xff

// memTypes are the task types a memRec codes, by code.
var memTypes = [...]string{"", bgtype.TypeTask, bgtype.TypeSubAgent}

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

func memWakeCode(w bgtype.WakePolicy) uint8 {
	for i, x := range memWakes {
		if x == w {
			return uint8(i)
		}
	}
	return memOtherWake
}

func memStatusCode(st bgtype.Status) uint8 {
	for i, s := range memStatuses {
		if s == st {
			return uint8(i)
		}
	}
	panic("bgtask: memstore: unknown status " + string(st)) // records are validated before they are stored
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
func (t *memTerm) takeDone() *Entry {
	if e, _ := t.pool.Get().(*Entry); e != nil {
		return e
	}
	return new(Entry)
}

// recycle hands e, a compact entry the store no longer reaches, to the
// next record that turns terminal.
func (t *memTerm) recycle(e *Entry) {
	e.Rec = Rec{} // let go of its strings and result now
	t.pool.Put(e)
}

// newDone returns a copy of live, a record that just turned terminal, as
// an entry on no list, in e when given (taken before the caller took its
// lock). The copy shares live's strings and side structs, which never
// change in place.
func newDone(t *memTerm, e *Entry, live *Rec) *Entry {
	if e == nil {
		e = t.takeDone()
	}
	e.Rec = *live
	return e
}

// set writes m into r, a record no other goroutine reads yet, keeping r's
// place in the store (at). The result and slices are shared with m, not
// copied.
func (r *Rec) Set(m *bgtype.TaskMeta) {
	*r = Rec{
		ID: m.ID, Owner: m.Owner, typ: memTypeCode(m.Type), at: r.at, held: r.held, wake: memWakeCode(m.Wake),
		Detached: m.Detached, noTags: m.Tags != nil && len(m.Tags) == 0,
	}
	if m.Name != "" || m.IdempotencyKey != "" || r.wake == memOtherWake || r.typ == memOtherType ||
		m.Parent != (bgtype.Parent{}) || len(m.Tags) > 0 {
		r.setIdent(m)
	}
	r.SetMutable(m)
}

// setIdent keeps the rarely set identity fields of m in r.ident. Out of
// line: set runs on the task's goroutine, whose frames stay small
// (docs/internals.md).
//
//go:noinline
func (r *Rec) setIdent(m *bgtype.TaskMeta) {
	x := &memIdent{name: m.Name, key: m.IdempotencyKey, parent: m.Parent}
	if len(m.Tags) > 0 {
		x.tags = m.Tags
	}
	if r.wake == memOtherWake {
		x.wake = m.Wake
	}
	if r.typ == memOtherType {
		x.typ = m.Type
	}
	r.ident = x
}

// setMutable writes into r the fields of m that change after a record is
// inserted (those setMutable of two TaskMetas writes), leaving the
// identity fields alone: a Task reads them meanwhile without a lock.
func (r *Rec) SetMutable(m *bgtype.TaskMeta) {
	r.instance, r.result = m.Instance, m.Result
	r.created, r.started, r.finished = unixNanos(m.CreatedAt), unixNanos(m.StartedAt), unixNanos(m.FinishedAt)
	r.status, r.announced = memStatusCode(m.Status), m.Announced
	if m.Description == "" && m.Error == "" && m.CancelReason == "" && m.Stack == "" && m.ErrorKind == "" &&
		m.Attempt == 0 && m.Input == nil && m.MoreInput == nil && m.Progress == nil && m.Resume == nil && m.OutputBytes == 0 {
		r.rare = nil
		return
	}
	if x := r.rare; x != nil && x.description == m.Description && x.errText == m.Error && x.cancelReason == m.CancelReason &&
		x.stack == m.Stack && x.errorKind == m.ErrorKind && x.attempt == m.Attempt && x.input == m.Input && sameSlice(x.moreInput, m.MoreInput) && x.progress == m.Progress && x.resume == m.Resume &&
		x.outputBytes == m.OutputBytes {
		return // unchanged: no allocation
	}
	r.setRare(m)
}

// sameSlice reports whether a and b are the same slice (not equal ones:
// a record's fields are shared, never changed in place).
func sameSlice[E any](a, b []E) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// setRare keeps the rarely set mutable fields of m in a new r.rare. Out of
// line, as setIdent.
//
//go:noinline
func (r *Rec) setRare(m *bgtype.TaskMeta) {
	r.rare = &memRare{
		description: m.Description, errText: m.Error, cancelReason: m.CancelReason,
		stack: m.Stack, errorKind: m.ErrorKind, attempt: m.Attempt, input: m.Input, moreInput: m.MoreInput, progress: m.Progress,
		resume: m.Resume, outputBytes: m.OutputBytes,
	}
}

// update is setMutable of two TaskMetas on r: it writes the fields of next
// a reducer may change, if any differs, and reports whether it wrote. Out
// of line: its frame holds a whole TaskMeta.
//
//go:noinline
func (r *Rec) update(next *bgtype.TaskMeta) bool {
	var cur bgtype.TaskMeta
	r.ExpandInto(&cur)
	if !setMutable(&cur, next) {
		return false
	}
	r.SetMutable(&cur)
	return true
}

// merge is mergeUpsert of u on r, in place: it reports whether u landed.
// Out of line: its frame holds a whole TaskMeta.
//
//go:noinline
func (r *Rec) merge(u *bgtype.TaskMeta, at time.Time) bool {
	var cur bgtype.TaskMeta
	r.ExpandInto(&cur)
	if !reduce.MergeUpsert(&cur, u, at) {
		return false
	}
	r.SetMutable(&cur) // mergeUpsert changes no identity field
	return true
}

// livePlain reports whether r is live, not finished, and has none of the
// fields of memRare: a plain end (CommitEnd) changes only its status,
// result and finish time.
func (r *Rec) livePlain() bool {
	return r.rare == nil && !r.IsTerminal() && r.finished == memNoTime
}

// isTerminal reports whether r's status is terminal.
func (r *Rec) IsTerminal() bool { return memStatuses[r.status].IsTerminal() }

// name, parent, wakePolicy and key read identity fields, which never
// change: no lock is needed.
func (r *Rec) Name() string {
	if r.ident == nil {
		return ""
	}
	return r.ident.name
}

func (r *Rec) Parent() bgtype.Parent {
	if r.ident == nil {
		return bgtype.Parent{}
	}
	return r.ident.parent
}

// parentRun returns the run of the record's parent.
func (r *Rec) ParentRun() string {
	if r.ident == nil {
		return ""
	}
	return r.ident.parent.RunID
}

func (r *Rec) WakePolicy() bgtype.WakePolicy {
	if r.wake == memOtherWake {
		return r.ident.wake
	}
	return memWakes[r.wake]
}

func (r *Rec) Key() string {
	if r.ident == nil {
		return ""
	}
	return r.ident.key
}

// expand returns the record r holds, sharing its result and slices (use
// cloneMeta before handing it out).
func (r *Rec) Expand() bgtype.TaskMeta {
	var m bgtype.TaskMeta
	r.ExpandInto(&m)
	return m
}

// expandInto is expand into *m, field by field: no TaskMeta is built on
// the stack and copied (it runs on a task's goroutine, at the end).
func (r *Rec) ExpandInto(m *bgtype.TaskMeta) {
	*m = bgtype.TaskMeta{}
	m.ID, m.Owner, m.Instance, m.Result = r.ID, r.Owner, r.instance, r.result
	m.CreatedAt, m.StartedAt, m.FinishedAt = fromNanos(r.created), fromNanos(r.started), fromNanos(r.finished)
	m.Status, m.Detached, m.Announced = memStatuses[r.status], r.Detached, r.announced
	if r.wake != memOtherWake {
		m.Wake = memWakes[r.wake]
	}
	if r.typ != memOtherType {
		m.Type = memTypes[r.typ]
	}
	if r.noTags {
		m.Tags = []string{}
	}
	if x := r.ident; x != nil {
		m.Name, m.IdempotencyKey, m.Parent = x.name, x.key, x.parent
		if r.wake == memOtherWake {
			m.Wake = x.wake
		}
		if r.typ == memOtherType {
			m.Type = x.typ
		}
		if x.tags != nil {
			m.Tags = x.tags
		}
	}
	if x := r.rare; x != nil {
		m.Description, m.Error, m.CancelReason = x.description, x.errText, x.cancelReason
		m.Stack, m.ErrorKind, m.Attempt = x.stack, x.errorKind, x.attempt
		m.Input, m.MoreInput, m.Progress, m.Resume = x.input, x.moreInput, x.progress, x.resume
		m.OutputBytes = x.outputBytes
	}
}

// Start marks a new record, not yet shared, running from its creation
// time (admitted) or queued (not admitted).
func (r *Rec) Start(admitted bool) {
	if admitted {
		r.status, r.started = memStatusCode(bgtype.StatusRunning), r.created
	} else {
		r.status = memStatusCode(bgtype.StatusQueued)
	}
}

// SetParentRun sets the run of a record that has a parent (so its identity
// part is set) and is still private to its spawn.
func (r *Rec) SetParentRun(run string) { r.ident.parent.RunID = run }
