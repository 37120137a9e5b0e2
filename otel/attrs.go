package bgotel

import (
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"

	"go.opentelemetry.io/otel/attribute"
)

// Attribute keys on spans and metrics.
const (
	KeyTaskID       = attribute.Key("bgtask.task.id")
	KeyTaskName     = attribute.Key("bgtask.task.name")
	KeyTaskType     = attribute.Key("bgtask.task.type")
	KeyTaskOwner    = attribute.Key("bgtask.task.owner")
	KeyTaskStatus   = attribute.Key("bgtask.task.status")
	KeyParentTaskID = attribute.Key("bgtask.parent.task.id")
	KeyRunID        = attribute.Key("bgtask.run.id")
	KeyCallID       = attribute.Key("bgtask.call.id")
	KeyAgentID      = attribute.Key("bgtask.agent.id")
	KeyEventType    = attribute.Key("bgtask.event.type")
	KeyInputID      = attribute.Key("bgtask.input.id")
	KeyInboxName    = attribute.Key("bgtask.inbox.name")
	// KeyErrorType is the OpenTelemetry error.type attribute; its values
	// are the Kind constants.
	KeyErrorType = attribute.Key("error.type")
)

// Error kinds: the value of error.type on a task that did not complete.
// More kinds may be added; a consumer should treat an unknown kind as a
// failure.
const (
	KindError       = "error"       // the function returned an error
	KindTimeout     = "timeout"     // its WithTimeout or WithDeadline passed
	KindPanic       = "panic"       // the function panicked
	KindCanceled    = "cancelled"   // the task was cancelled
	KindInterrupted = "interrupted" // the process that ran it is gone
)

// errorKind returns the kind of a terminal record's end, "" for a completed
// task.
func errorKind(m bgtype.TaskMeta) string {
	switch m.Status {
	case bgtype.StatusFailed:
		if m.ErrorKind != "" {
			return string(m.ErrorKind) // error, timeout, panic
		}
		if m.Stack != "" {
			return KindPanic
		}
		return KindError
	case bgtype.StatusCanceled:
		return KindCanceled
	case bgtype.StatusInterrupted:
		return KindInterrupted
	}
	return ""
}

// identity returns the span attributes of a task's identity and lineage;
// empty optional fields are left out.
func identity(m bgtype.TaskMeta) []attribute.KeyValue {
	kv := []attribute.KeyValue{KeyTaskID.String(m.ID), KeyTaskOwner.String(m.Owner), KeyTaskType.String(m.Type)}
	for _, f := range []struct {
		k attribute.Key
		v string
	}{
		{KeyTaskName, m.Name}, {KeyParentTaskID, m.Parent.TaskID}, {KeyRunID, m.Parent.RunID},
		{KeyCallID, m.Parent.CallID}, {KeyAgentID, m.Parent.AgentID},
	} {
		if f.v != "" {
			kv = append(kv, f.k.String(f.v))
		}
	}
	return kv
}

// endAttrs returns the attributes of a task's end: its status and, unless
// it completed, its error kind. Also the attributes of the finished count
// and the duration, with the type.
func endAttrs(m bgtype.TaskMeta, withType bool) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 3)
	if withType {
		kv = append(kv, KeyTaskType.String(m.Type))
	}
	kv = append(kv, KeyTaskStatus.String(string(m.Status)))
	if k := errorKind(m); k != "" {
		kv = append(kv, KeyErrorType.String(k))
	}
	return kv
}

// maxStatusDescription bounds the error text put in a span's status: the
// record keeps the whole text, a trace needs the gist.
const maxStatusDescription = 1024

// cut returns s cut to at most n bytes, on a rune boundary, ending in "…"
// when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
