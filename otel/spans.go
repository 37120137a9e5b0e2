package bgotel

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/bgtask/bgtask"
)

// Span event names.
const (
	EventRunning        = "bgtask.task.running"         // a queued task got its slot
	EventProgress       = "bgtask.task.progress"        // a custom event (Task.Emit), with bgtask.event.type
	EventMessage        = "bgtask.task.message"         // a message to the owner (no content)
	EventInputRequested = "bgtask.task.input_requested" // Task.RequestInput, with bgtask.input.id
	EventInputClosed    = "bgtask.task.input_closed"    // back to running: answered, or the wait ended
)

// taskState is what the observer keeps of a live task: its first record,
// and the span of a task started through Spawn once the span is attached.
// Span events that happen before then (a queued task starting) wait in
// pending. The fields are guarded by mu, which also orders the span calls.
type taskState struct {
	mu      sync.Mutex
	meta    bgtype.TaskMeta // the first record: identity and lineage
	span    *taskSpan
	pending []spanEvent
	input   string          // the open input request's id
	final   bgtype.TaskMeta // the terminal record, once done
	done    bool
	// uncommitted is the error of a terminal record that could not be
	// committed, once done.
	uncommitted string
}

type spanEvent struct {
	name  string
	at    time.Time
	attrs []attribute.KeyValue
}

// taskSpan is the span Spawn started for one task.
type taskSpan struct {
	span     trace.Span
	attached atomic.Bool // a taskState holds it
	ended    sync.Once
}

// attach gives st the span, with the task's identity and the events that
// came before. If the task has already ended, the span ends now.
func (st *taskState) attach(s *taskSpan) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.span != nil {
		return
	}
	st.span = s
	s.attached.Store(true)
	s.span.SetName(spanName(st.meta.Type))
	s.span.SetAttributes(identity(st.meta)...)
	for _, e := range st.pending {
		s.span.AddEvent(e.name, trace.WithTimestamp(e.at), trace.WithAttributes(e.attrs...))
	}
	st.pending = nil
	if st.done {
		s.end(st.final, st.uncommitted)
	}
}

// event adds a span event, if the task has a span. Only the start of a
// queued task can come before the span is attached; the events of the
// running function come after (Spawn's wrapper attaches it first), so
// without a span they are those of a task spawned without one.
func (st *taskState) event(name string, attrs ...attribute.KeyValue) {
	if st.span != nil {
		st.span.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// transition records a non-terminal transition.
func (st *taskState) transition(tr bgtask.Transition) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case tr.To == bgtype.StatusAwaitingInput && tr.Task.Input != nil:
		st.input = tr.Task.Input.ID
		st.event(EventInputRequested, KeyInputID.String(st.input))
	case tr.From == bgtype.StatusAwaitingInput:
		st.event(EventInputClosed, KeyInputID.String(st.input))
		st.input = ""
	case tr.From == bgtype.StatusQueued && tr.To == bgtype.StatusRunning:
		if st.span == nil {
			st.pending = append(st.pending, spanEvent{EventRunning, time.Now(), nil})
			return
		}
		st.event(EventRunning)
	}
}

// custom records a custom event. Its payload stays out of the trace.
func (st *taskState) custom(ev bgtype.Event) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ev.EventType == bgtype.EventTypeMessage {
		st.event(EventMessage)
		return
	}
	st.event(EventProgress, KeyEventType.String(ev.EventType))
}

// end records the terminal record, and ends the span if there is one.
// uncommitted is the error of a terminal record that could not be
// committed, or "".
func (st *taskState) end(meta bgtype.TaskMeta, uncommitted string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done, st.final, st.uncommitted = true, meta, uncommitted
	if st.span != nil {
		st.span.end(meta, uncommitted)
	}
}

// end sets the span's end attributes and status from the terminal record
// and ends it. Only the first call counts.
func (s *taskSpan) end(meta bgtype.TaskMeta, uncommitted string) {
	s.ended.Do(func() {
		s.span.SetAttributes(endAttrs(meta, false)...)
		switch {
		case uncommitted != "":
			s.span.SetStatus(codes.Error, cut(uncommitted, maxStatusDescription))
		case meta.Status == bgtype.StatusFailed, meta.Status == bgtype.StatusInterrupted:
			s.span.SetStatus(codes.Error, cut(meta.Error, maxStatusDescription))
		}
		s.span.End()
	})
}

// spanName names a task's span after its type, which is what groups tasks;
// a spawn that failed has no type.
func spanName(typ string) string {
	if typ == "" {
		return "bgtask spawn"
	}
	return "bgtask " + typ
}
