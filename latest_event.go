package bgtask

import (
	"encoding/json"
	"slices"
	"time"
)

// LatestEvent is the latest custom event a live task emitted (Task.Emit),
// whatever its wake policy, so a model that was not woken by it can still
// see it. Messages (EventTypeMessage) are not kept here: they are kept in
// the message history (Owner.Messages). A task's progress is another thing:
// what it reports with Task.ReportProgress (TaskMeta.Progress).
type LatestEvent struct {
	EventType string          // the latest event's type
	Payload   json.RawMessage // its payload, as JSON (capped like every payload)
	At        time.Time       // when it was emitted
	Count     int             // how many custom events the task has emitted so far
}

// LatestEvent returns the latest custom event of one of the owner's tasks
// while this Manager runs it. ok is false for a task that emitted nothing,
// has ended, is not run here, or belongs to another owner. It is kept in
// memory only; LatestEvent never blocks on the task.
//
// It is the latest custom event of any type (Task.ReportProgress emits one
// of type EventTypeProgress too). The progress a task reported with
// ReportProgress is kept on its record (TaskMeta.Progress, read with Get),
// which outlives the task and this process.
func (o Owner) LatestEvent(id string) (ev LatestEvent, ok bool) {
	m := o.m
	m.mu.Lock()
	t := m.nodes[id]
	if t == nil || t.phase == phaseGone || t.rec.Owner != o.id {
		m.mu.Unlock()
		return LatestEvent{}, false
	}
	m.mu.Unlock()
	r := t.rare.Load()
	if r == nil {
		return LatestEvent{}, false
	}
	t.emitMu.Lock()
	ev = r.latestEvent
	t.emitMu.Unlock()
	if ev.Count == 0 {
		return LatestEvent{}, false
	}
	ev.Payload = slices.Clone(ev.Payload)
	return ev, true
}
