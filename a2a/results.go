package bga2a

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/internal/bytecache"
)

// kept holds the results of the tasks this server started, for those
// whose record keeps only a cut copy (the Manager's Caps.MaxResultBytes):
// the whole JSON result when it is within the artifact cap, or else the
// start of it that the artifact carries. The result artifact is made from
// it. It is bounded in bytes; past the bound the oldest results are
// forgotten first, and their tasks show the record's cut copy, marked as
// cut. Safe for concurrent use. The zero value is not usable: use newKept.
type kept struct {
	c *bytecache.Cache[keptResult]
}

// keptResult is one kept result: raw, the whole JSON result, or else text,
// its start as the cut artifact carries it, and size, the whole result's
// size.
type keptResult struct {
	raw  json.RawMessage
	text string
	size int
}

func (r keptResult) len() int64 { return int64(len(r.raw) + len(r.text)) }

func newKept(max int) *kept {
	return &kept{bytecache.New(int64(max), keptResult.len)}
}

// put keeps r as the result of task id, unless it alone is over the bound.
func (k *kept) put(id string, r keptResult) { k.c.Put(id, r) }

// get returns the result of task id, if it is kept.
func (k *kept) get(id string) (keptResult, bool) { return k.c.Get(id) }

// drop forgets the result of task id.
func (k *kept) drop(id string) { k.c.Delete(id) }

// settle is called with the result a task's record holds once the task
// has ended: a task that did not complete, or whose record holds its
// result whole (not the record's cut copy), needs no kept result.
func (k *kept) settle(id string, completed bool, recorded json.RawMessage) {
	if _, _, cut := recordCut(recorded); !completed || !cut {
		k.drop(id)
	}
}

// keeping wraps the agent function: a result that encodes to JSON is handed
// to bgtask already encoded, and kept until the task's end shows whether
// its record holds it whole. A result that does not encode is handed on
// unchanged, for bgtask to fail the task as it does.
func (s *Server) keeping(ctx context.Context, t *bgtask.Task) (any, error) {
	v, err := s.agent(ctx, t)
	if err != nil {
		return v, err
	}
	raw, merr := json.Marshal(v)
	if merr != nil {
		return v, err
	}
	r := keptResult{raw: raw}
	if len(raw) > s.cfg.maxArtifact {
		a := s.artifactOf(raw)
		r = keptResult{text: a.Parts[0].(a2a.TextPart).Text, size: len(raw)}
	}
	s.results.put(t.ID(), r)
	return json.RawMessage(raw), nil
}

// maxMessageIDs is how many client message ids the server remembers, as
// many as the Manager's message history can hold (20 messages of 4096
// tasks); the oldest are forgotten first.
const maxMessageIDs = 20 * 4096

// maxMessageIDBytes caps the messageId of a client's message.
const maxMessageIDBytes = 1 << 10

// messageIDs maps the ids the Manager's message history gives the messages
// clients sent to the messageId each client gave, so the task's history
// shows the client's own ids. The zero value is ready.
type messageIDs struct {
	mu    sync.Mutex // protects the fields below
	byRec map[string]string
	order []string
}

// get returns the client's id of history record rec, if known.
func (m *messageIDs) get(rec string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byRec[rec]
	return id, ok
}

// link finds, in the task's history recs (oldest first), the newest record
// of msg not linked yet, and links it to the client's id.
func (m *messageIDs) link(recs []bgtask.MessageRecord, msg bgtype.Message, clientID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Direction != bgtask.MessageIn || r.From != msg.From || r.InReplyTo != msg.InReplyTo {
			continue
		}
		if r.Content != msg.Content && !(r.Truncated && strings.HasPrefix(msg.Content, r.Content)) {
			continue
		}
		if _, linked := m.byRec[r.ID]; linked {
			continue
		}
		if m.byRec == nil {
			m.byRec = make(map[string]string)
		}
		m.byRec[r.ID] = clientID
		m.order = append(m.order, r.ID)
		if len(m.order) > maxMessageIDs {
			delete(m.byRec, m.order[0])
			m.order = m.order[1:]
		}
		return
	}
}
