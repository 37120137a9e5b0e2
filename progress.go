package bgtask

import (
	"encoding/json"
	"slices"
	"time"
)

// Progress is the latest custom event a live task emitted (Task.Emit),
// whatever its wake policy, so a model that was not woken by it can still
// see it. Messages (EventTypeMessage) are not progress: they are kept in the
// message history (Owner.Messages).
type Progress struct {
	EventType string          // the latest event's type
	Payload   json.RawMessage // its payload, as JSON (capped like every payload)
	At        time.Time       // when it was emitted
	Count     int             // how many custom events the task has emitted so far
}

// Progress returns the latest progress of one of the owner's tasks while
// this Manager runs it. ok is false for a task that emitted nothing, has
// ended, is not run here, or belongs to another owner. Progress is kept in
// memory only; it never blocks on the task.
//
// It is the latest custom event of any type (Task.ReportProgress emits one
// of type EventTypeProgress too). The typed progress a task reported with
// ReportProgress is also kept on its record (TaskMeta.Progress, read with
// Get), which outlives the task and this process.
func (o Owner) Progress(id string) (p Progress, ok bool) {
	m := o.m
	m.mu.Lock()
	t := m.nodes[id]
	if t == nil || t.phase == phaseGone || t.rec.Owner != o.id {
		m.mu.Unlock()
		return Progress{}, false
	}
	m.mu.Unlock()
	r := t.rare.Load()
	if r == nil {
		return Progress{}, false
	}
	t.emitMu.Lock()
	p = r.progress
	t.emitMu.Unlock()
	if p.Count == 0 {
		return Progress{}, false
	}
	p.Payload = slices.Clone(p.Payload)
	return p, true
}
