// The message history is a runtime concept: the Manager records every
// message sent to or by a task, and Owner.Messages (and so get_task) reads it.

package bgtask

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/fifo"
	"github.com/bgtask/bgtask/internal/idgen"
)

// Directions of a MessageRecord.
const (
	// MessageIn: a message sent to the task (Owner.Send), or an answer to
	// its input request.
	MessageIn = "in"
	// MessageOut: a message the task sent to its owner (Task.Emit of
	// EventTypeMessage, or the send_message tool's "parent" relation).
	MessageOut = "out"
)

// Bounds of the message history, so that a Manager that runs for months
// keeps a bounded amount of it: the last messagesPerTask messages of at most
// messageTasks tasks, each content cut at messageContentMax bytes, and at
// most messageBytesMax bytes of content in all. The history of the task that
// got its first message longest ago is forgotten first.
const (
	messagesPerTask   = 20
	messageTasks      = 4096
	messageContentMax = 4 << 10
	messageBytesMax   = 8 << 20
)

// MessageRecord is one message of a task's recent history, as get_task
// shows it. The history is kept in memory only (it is not task metadata):
// it is lost with the process, and bounded (see Owner.Messages).
type MessageRecord struct {
	ID        string    `json:"id"`
	Direction string    `json:"direction"` // MessageIn or MessageOut
	From      string    `json:"from"`
	Content   string    `json:"content"`
	Truncated bool      `json:"truncated,omitempty"` // Content was cut to its first 4 KiB
	InReplyTo string    `json:"in_reply_to,omitempty"`
	At        time.Time `json:"at"`
}

// Messages returns the last messages (at most 20) sent to one of the
// owner's tasks and by it, oldest first: messages delivered with Send
// (direction "in", answers to input requests included) and messages the
// task emitted to its owner (EventTypeMessage, direction "out"). Contents
// longer than 4 KiB are cut (Truncated). The history lives in memory, for
// at most 4096 tasks and 8 MiB of content; the oldest histories are
// forgotten first, so a task may have a record and no messages. ErrNotFound
// for an unknown task or another owner's.
func (o Owner) Messages(ctx context.Context, id string) ([]MessageRecord, error) {
	if _, err := o.Get(ctx, id); err != nil {
		return nil, err
	}
	return o.m.msgs.list(id), nil
}

// messageLog is the Manager's message history. The zero value is ready.
type messageLog struct {
	mu     sync.Mutex // guards the fields below
	byTask map[string]*messageRing
	order  fifo.Queue[string] // task ids, in the order of their first message
	bytes  int                // content bytes kept
}

// messageRing is the last messagesPerTask messages of one task.
type messageRing struct {
	recs  [messagesPerTask]MessageRecord
	next  int // where the next record goes
	n     int // records kept
	bytes int
}

// newMessageID returns "msg_" and 32 hex digits, sortable by time.
func newMessageID() string { return idgen.New("msg_", clock.Now()) }

// add records msg in the history of task id and returns the record's id.
func (l *messageLog) add(id, dir string, msg bgtype.Message) string {
	rec := MessageRecord{ID: newMessageID(), Direction: dir, From: msg.From, Content: msg.Content, InReplyTo: msg.InReplyTo, At: clock.Now()}
	if len(rec.Content) > messageContentMax {
		cut := messageContentMax
		for cut > 0 && !utf8.RuneStart(rec.Content[cut]) {
			cut--
		}
		rec.Content, rec.Truncated = rec.Content[:cut], true
	}
	size := len(rec.Content)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byTask[id]
	if r == nil {
		if l.byTask == nil {
			l.byTask = make(map[string]*messageRing)
		}
		r = &messageRing{}
		l.byTask[id] = r
		l.order.Push(id)
	}
	if r.n == messagesPerTask {
		old := len(r.recs[r.next].Content)
		r.bytes -= old
		l.bytes -= old
	} else {
		r.n++
	}
	r.recs[r.next] = rec
	r.next = (r.next + 1) % messagesPerTask
	r.bytes += size
	l.bytes += size
	for l.order.Len() > 1 && (l.order.Len() > messageTasks || l.bytes > messageBytesMax) {
		old := l.order.Pop()
		if old == id { // never evict the history just written to: move it to the back
			l.order.Push(old)
			continue
		}
		l.bytes -= l.byTask[old].bytes
		delete(l.byTask, old)
	}
	return rec.ID
}

// list returns a copy of the history of task id, oldest first.
func (l *messageLog) list(id string) []MessageRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byTask[id]
	if r == nil {
		return []MessageRecord{}
	}
	out := make([]MessageRecord, 0, r.n)
	start := (r.next - r.n + messagesPerTask) % messagesPerTask
	for i := range r.n {
		out = append(out, r.recs[(start+i)%messagesPerTask])
	}
	return out
}

// emitted records an EventTypeMessage the task t sent to its owner and
// returns the record's id. A payload that is a JSON string is the content; a
// payload that is neither a string nor a Message is kept as its JSON text.
func (l *messageLog) emitted(t *Task, payload json.RawMessage) string {
	msg := decodeMessage(payload)
	if msg.From == "" {
		msg.From = t.rec.ID
	}
	return l.add(t.rec.ID, MessageOut, msg)
}

// decodeMessage reads the payload of an EventTypeMessage: a JSON string is
// the content, a Message is itself, anything else is kept as its JSON text.
func decodeMessage(payload json.RawMessage) bgtype.Message {
	var msg bgtype.Message
	if json.Unmarshal(payload, &msg.Content) != nil && json.Unmarshal(payload, &msg) != nil {
		msg = bgtype.Message{Content: string(payload)}
	}
	return msg
}
