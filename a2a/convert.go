package bga2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// ResultArtifactID is the id of the artifact that carries a completed task's
// result.
const ResultArtifactID a2a.ArtifactID = "result"

// messageText joins the text parts of a client's message, checked against
// the caps. Only text parts are accepted: the sub-agent's inbox carries text.
func (s *Server) messageText(m *a2a.Message) (string, error) {
	if m == nil {
		return "", fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	if len(m.Parts) == 0 {
		return "", fmt.Errorf("message has no parts: %w", a2a.ErrInvalidParams)
	}
	if len(m.Parts) > s.cfg.maxParts {
		return "", fmt.Errorf("message has %d parts, more than %d: %w", len(m.Parts), s.cfg.maxParts, a2a.ErrInvalidParams)
	}
	var b strings.Builder
	for i, p := range m.Parts {
		var text string
		switch p := p.(type) {
		case a2a.TextPart:
			text = p.Text
		case *a2a.TextPart:
			text = p.Text
		default:
			return "", fmt.Errorf("part %d is not text: only text parts are accepted: %w", i, a2a.ErrUnsupportedContentType)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
		if b.Len() > s.cfg.maxMessage {
			return "", fmt.Errorf("message text is longer than %d bytes: %w", s.cfg.maxMessage, a2a.ErrInvalidParams)
		}
	}
	return b.String(), nil
}

// cut shortens text to at most max bytes, at a rune boundary, ending with a
// marker that gives the original size, as bgtask cuts texts.
func cut(text string, max int) string {
	if len(text) <= max {
		return text
	}
	marker := fmt.Sprintf("…[truncated: %d bytes total]", len(text))
	n := max - len(marker)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	out := text[:n] + marker
	if len(out) > max { // a cap smaller than the marker: keep the cap
		out = out[:max]
		for len(out) > 0 && !utf8.ValidString(out) {
			out = out[:len(out)-1]
		}
	}
	return out
}

// agentMessage is a status message from the agent, for task id.
func (s *Server) agentMessage(id, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: cut(text, s.cfg.maxMessage)})
	m.TaskID = a2a.TaskID(id)
	m.ContextID = id
	return m
}

// resultArtifact is the result artifact of completed task id, whose record
// (or completion event) holds recorded: made from the result the server
// kept, if any, or else from the record's, which may be its cut copy,
// then marked as cut (see truncatedArtifact).
func (s *Server) resultArtifact(id string, recorded json.RawMessage) *a2a.Artifact {
	if r, ok := s.results.get(id); ok {
		if r.raw == nil {
			return truncatedArtifact(r.text, r.size)
		}
		return s.artifactOf(r.raw)
	}
	if size, preview, ok := recordCut(recorded); ok {
		return truncatedArtifact(cut(preview, s.cfg.maxArtifact), size)
	}
	return s.artifactOf(recorded)
}

// artifactOf turns a JSON result into the result artifact: a string
// becomes a text part, an object a data part, anything else its JSON text.
// A result over the artifact cap becomes a text part cut with a marker, and
// the artifact's metadata says so (see truncatedArtifact).
func (s *Server) artifactOf(result json.RawMessage) *a2a.Artifact {
	var part a2a.Part
	var str string
	var obj map[string]any
	raw := bytes.TrimSpace(result)
	switch {
	case len(raw) > s.cfg.maxArtifact:
		text := string(raw)
		if raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
			text = str
		}
		return truncatedArtifact(cut(text, s.cfg.maxArtifact), len(raw))
	case len(raw) == 0:
		part = a2a.TextPart{Text: "null"}
	case raw[0] == '"' && json.Unmarshal(raw, &str) == nil:
		part = a2a.TextPart{Text: str}
	case raw[0] == '{' && json.Unmarshal(raw, &obj) == nil:
		part = a2a.DataPart{Data: obj}
	default:
		part = a2a.TextPart{Text: string(raw)}
	}
	return &a2a.Artifact{ID: ResultArtifactID, Name: "result", Parts: a2a.ContentParts{part}}
}

// Metadata keys of a result artifact that does not hold the whole result.
const (
	// MetaTruncated is true in the metadata of a result artifact that holds
	// only the start of the result.
	MetaTruncated = "truncated"
	// MetaOriginalBytes is the size of the whole result, as JSON text, in
	// the metadata of a cut result artifact.
	MetaOriginalBytes = "original_bytes"
)

// truncatedArtifact is a result artifact that holds only the start of the
// result, text (which ends with the marker of cut): its metadata says
// {"truncated": true, "original_bytes": size}, and so does its description.
func truncatedArtifact(text string, size int) *a2a.Artifact {
	return &a2a.Artifact{
		ID:          ResultArtifactID,
		Name:        "result",
		Description: fmt.Sprintf("The result was cut: it was %d bytes of JSON; this is its start.", size),
		Metadata:    map[string]any{MetaTruncated: true, MetaOriginalBytes: size},
		Parts:       a2a.ContentParts{a2a.TextPart{Text: text}},
	}
}

// recordCut reads the cut copy a record keeps of a result over the
// Manager's cap, {"truncated":true,"original_bytes":N,"preview":"…"}: the
// whole result's size and the start of its JSON text. ok is false for any
// other result.
func recordCut(recorded json.RawMessage) (size int, preview string, ok bool) {
	raw := bytes.TrimSpace(recorded)
	if len(raw) == 0 || raw[0] != '{' {
		return 0, "", false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || len(fields) != 3 || string(fields["truncated"]) != "true" {
		return 0, "", false
	}
	if json.Unmarshal(fields["original_bytes"], &size) != nil || json.Unmarshal(fields["preview"], &preview) != nil {
		return 0, "", false
	}
	return size, preview + fmt.Sprintf("…[truncated: %d bytes total]", size), true
}

// taskOf builds the A2A task from a record. answered, when not empty, is an
// input request the caller has just answered: a record still awaiting it
// reads as working.
func (s *Server) taskOf(rec bgtype.TaskMeta, history []bgtask.MessageRecord, answered string) *a2a.Task {
	t := &a2a.Task{
		ID:        a2a.TaskID(rec.ID),
		ContextID: rec.ID,
		Status:    s.statusOf(rec, answered),
		History:   s.historyOf(rec.ID, history),
	}
	if rec.Status == bgtype.StatusCompleted {
		t.Artifacts = []*a2a.Artifact{s.resultArtifact(rec.ID, rec.Result)}
	}
	if !rec.FinishedAt.IsZero() {
		ts := rec.FinishedAt
		t.Status.Timestamp = &ts
	}
	return t
}

func (s *Server) statusOf(rec bgtype.TaskMeta, answered string) a2a.TaskStatus {
	st := a2a.TaskStatus{State: State(rec.Status)}
	switch rec.Status {
	case bgtype.StatusAwaitingInput:
		if rec.Input != nil && rec.Input.ID == answered {
			st.State = a2a.TaskStateWorking
		} else if rec.Input != nil {
			st.Message = s.agentMessage(rec.ID, rec.Input.Prompt)
		}
	case bgtype.StatusFailed, bgtype.StatusInterrupted:
		st.Message = s.agentMessage(rec.ID, rec.Error)
	}
	return st
}

// historyOf maps the task's recent messages: those sent to it are the
// user's, those it sent are the agent's. A message a client sent keeps the
// client's messageId.
func (s *Server) historyOf(id string, recs []bgtask.MessageRecord) []*a2a.Message {
	if len(recs) == 0 {
		return nil
	}
	out := make([]*a2a.Message, 0, len(recs))
	for _, r := range recs {
		role := a2a.MessageRoleUser
		if r.Direction == bgtask.MessageOut {
			role = a2a.MessageRoleAgent
		}
		m := s.historyMessage(id, role, r.Content)
		if c, ok := s.msgIDs.get(r.ID); ok {
			m.ID = c
		} else if r.ID != "" {
			m.ID = r.ID
		}
		out = append(out, m)
	}
	return out
}

// historyMessage is a message of task id's history, with a new id.
func (s *Server) historyMessage(id string, role a2a.MessageRole, content string) *a2a.Message {
	return &a2a.Message{ID: a2a.NewMessageID(), Role: role, TaskID: a2a.TaskID(id), ContextID: id,
		Parts: a2a.ContentParts{a2a.TextPart{Text: cut(content, s.cfg.maxMessage)}}}
}

// eventsOf maps one task event to what the stream sends, and reports
// whether it ends the stream:
//
//   - a message the sub-agent sends: a working status update with it;
//   - another custom event (progress): a working status update whose message
//     has a data part {"event_type": …, "payload": …};
//   - an input request: an input-required status update with the prompt
//     (final: the client answers with a new message to the task);
//   - completed: the result artifact, then a completed status update;
//   - failed, interrupted: a failed status update with the error text;
//   - cancelled: a canceled status update.
func (s *Server) eventsOf(ev bgtype.Event) (out []a2a.Event, final bool) {
	info := a2a.TaskInfo{TaskID: a2a.TaskID(ev.TaskID), ContextID: ev.TaskID}
	status := func(state a2a.TaskState, msg *a2a.Message) *a2a.TaskStatusUpdateEvent {
		now := time.Now()
		return &a2a.TaskStatusUpdateEvent{
			TaskID: info.TaskID, ContextID: info.ContextID,
			Status: a2a.TaskStatus{State: state, Message: msg, Timestamp: &now},
			Final:  state.Terminal() || state == a2a.TaskStateInputRequired,
		}
	}
	switch ev.Kind {
	case bgtype.EventCustom:
		if m, ok := ev.Message(); ok {
			return []a2a.Event{status(a2a.TaskStateWorking, s.agentMessage(ev.TaskID, m.Content))}, false
		}
		var payload any
		if err := json.Unmarshal(ev.Payload, &payload); err != nil || len(ev.Payload) > s.cfg.maxMessage {
			payload = cut(string(ev.Payload), s.cfg.maxMessage)
		}
		m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.DataPart{Data: map[string]any{"event_type": ev.EventType, "payload": payload}})
		m.TaskID, m.ContextID = info.TaskID, info.ContextID
		return []a2a.Event{status(a2a.TaskStateWorking, m)}, false
	case bgtype.EventInputRequested:
		prompt := ""
		if ev.Input != nil {
			prompt = ev.Input.Prompt
		}
		return []a2a.Event{status(a2a.TaskStateInputRequired, s.agentMessage(ev.TaskID, prompt))}, true
	case bgtype.EventCompleted:
		art := &a2a.TaskArtifactUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID,
			Artifact: s.resultArtifact(ev.TaskID, ev.Result), LastChunk: true}
		return []a2a.Event{art, status(a2a.TaskStateCompleted, nil)}, true
	case bgtype.EventFailed, bgtype.EventInterrupted:
		return []a2a.Event{status(a2a.TaskStateFailed, s.agentMessage(ev.TaskID, ev.Error))}, true
	case bgtype.EventCanceled:
		return []a2a.Event{status(a2a.TaskStateCanceled, nil)}, true
	}
	return nil, false // commit_failed: the terminal event follows
}
