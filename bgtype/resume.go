package bgtype

import (
	"encoding/json"
	"time"
)

// Resume is what the record of a task spawned from a registered kind
// keeps so that another attempt, in this process or another, can run it
// again from where the last one got: the kind, its spec and the last
// checkpoint. A closure's record has none (TaskMeta.Resume is nil, and its
// JSON has no "resume" field).
//
// Kind, Spec, MaxAttempts and Ask are set at spawn and never changed; the other
// fields change with the record, through the reducer, fenced on its
// Attempt like every other write.
type Resume struct {
	Kind        string          `json:"kind"`                 // the registered kind's name, as "crawl/v1"
	Spec        json.RawMessage `json:"spec"`                 // the spawn's spec, as JSON
	MaxAttempts int             `json:"max_attempts"`         // attempts the task may take (yields excluded)
	Checkpoint  json.RawMessage `json:"checkpoint,omitempty"` // the last checkpoint saved (nil until one)
	SavedAt     time.Time       `json:"saved_at,omitzero"`    // when it was saved
	SavedBy     int64           `json:"saved_by,omitempty"`   // the attempt that saved it
	Yields      int64           `json:"yields,omitempty"`     // attempts that ended by yielding to a stop (they cost no attempt)
	QueuedAt    time.Time       `json:"queued_at,omitzero"`   // when it was last re-queued (for the unclaimed limit)
	ResumedAt   time.Time       `json:"resumed_at,omitzero"`  // when the current attempt started from the queue
	LastError   string          `json:"last_error,omitempty"` // why the previous attempt ended
	Ask         bool            `json:"ask,omitempty"`        // exhausted, the owner is asked: resume or abandon (KindConfig.ExhaustAsk)
	Rounds      int64           `json:"rounds,omitempty"`     // rounds of MaxAttempts more the owner granted (never decreases)
}

// Limit returns how many attempts the task may take in all: MaxAttempts,
// and as many again for each round the owner granted.
func (r *Resume) Limit() int64 { return int64(r.MaxAttempts) * (1 + r.Rounds) }

// Counted returns how many attempts of a record with this Resume and the
// given Attempt counted against MaxAttempts: attempts that yielded to a
// stop are not counted.
func (r *Resume) Counted(attempt int64) int64 { return attempt - r.Yields }

// Clone returns a copy of r that shares no bytes with it; nil for nil.
func (r *Resume) Clone() *Resume {
	if r == nil {
		return nil
	}
	c := *r
	c.Spec = cloneRaw(r.Spec)
	c.Checkpoint = cloneRaw(r.Checkpoint)
	return &c
}

// Equal reports whether r and o hold the same values.
func (r *Resume) Equal(o *Resume) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Kind == o.Kind && string(r.Spec) == string(o.Spec) && r.MaxAttempts == o.MaxAttempts &&
		string(r.Checkpoint) == string(o.Checkpoint) && r.SavedAt.Equal(o.SavedAt) && r.SavedBy == o.SavedBy &&
		r.Yields == o.Yields && r.QueuedAt.Equal(o.QueuedAt) && r.ResumedAt.Equal(o.ResumedAt) && r.LastError == o.LastError &&
		r.Ask == o.Ask && r.Rounds == o.Rounds
}

// Valid reports whether r can be stored: a kind name, a spec and a
// checkpoint that are JSON, at least one attempt allowed, counts that are
// not negative. A nil Resume (a closure's) is valid.
func (r *Resume) Valid() bool {
	return r == nil || r.Kind != "" && json.Valid(r.Spec) && (r.Checkpoint == nil || json.Valid(r.Checkpoint)) &&
		r.MaxAttempts > 0 && r.Yields >= 0 && r.Rounds >= 0 && r.SavedBy >= 0 && encodable(r.SavedAt) && encodable(r.QueuedAt) && encodable(r.ResumedAt)
}

// encodable reports whether t marshals to JSON (its year is 0 to 9999).
func encodable(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y <= 9999
}
