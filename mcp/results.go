package bgmcp

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask/internal/bytecache"
	"github.com/bgtask/bgtask/internal/jsoncap"
)

// DefaultResultMemory is how many bytes of whole tool results a Server
// keeps in memory by default (see WithResultMemory).
const DefaultResultMemory = 64 << 20

// truncatedKey is the _meta key of a tool result cut to fit the task's
// record: {"originalBytes": N}, N the size of the whole result as JSON.
const truncatedKey = "io.github.bgtask/truncated"

// WithResultMemory sets how many bytes of whole tool results the Server
// keeps in memory, for the task-mode calls whose result (as JSON) is longer
// than the Manager's Caps.MaxResultBytes. Such a task's record holds a cut
// copy: a result whose content is one text block, the start of the
// result's text followed by "…[truncated: N bytes total]", with _meta
// "io.github.bgtask/truncated": {"originalBytes": N} and the same isError.
// tasks/result returns the whole result while the Server keeps it, and the
// cut copy once it does not: after a restart, from another instance that
// shares the store, or when newer whole results needed the room (the oldest
// are dropped first; one larger than n is never kept). Default
// DefaultResultMemory (64 MiB); 0 keeps none; a negative n makes NewServer
// fail.
func WithResultMemory(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.fail(errors.New("bgmcp: WithResultMemory: negative size " + strconv.FormatInt(n, 10)))
			return
		}
		c.results.memory, c.results.set = n, true
	}
}

// resultConfig is the part of config that WithResultMemory and
// WithRetainFor set.
type resultConfig struct {
	memory    int64
	set       bool          // memory was set; otherwise DefaultResultMemory
	retainFor time.Duration // WithRetainFor; 0 for the default
}

// budget is the configured memory, or the default.
func (c resultConfig) budget() int64 {
	if c.set {
		return c.memory
	}
	return DefaultResultMemory
}

// wholeResults keeps the whole results that task records hold cut, oldest
// dropped first past its bytes. Safe for concurrent use.
type wholeResults struct {
	c *bytecache.Cache[wholeResult]
}

type wholeResult struct {
	owner string
	body  json.RawMessage
}

func newWholeResults(max int64) *wholeResults {
	return &wholeResults{bytecache.New(max, func(r wholeResult) int64 { return int64(len(r.body)) })}
}

// keep keeps the whole result of a task; one larger than the budget is not
// kept.
func (w *wholeResults) keep(owner, id string, body json.RawMessage) {
	w.c.Put(id, wholeResult{owner, body})
}

// get returns the whole result of one of owner's tasks, if kept.
func (w *wholeResults) get(owner, id string) (json.RawMessage, bool) {
	r, ok := w.c.Get(id)
	if !ok || r.owner != owner {
		return nil, false
	}
	return r.body, true
}

// recordResult returns what a task-mode call records as its result: the
// whole result as JSON when it fits in limit bytes, else the cut copy
// (cutResult), with whole set to the whole result for the Server to keep.
func recordResult(res *mcp.CallToolResult, limit int) (record, whole json.RawMessage) {
	b, err := json.Marshal(res)
	if err != nil {
		b, _ = json.Marshal(errorResult(errors.New("bgmcp: encoding the tool's result: " + err.Error())))
		return b, nil
	}
	if len(b) <= limit {
		return b, nil
	}
	return cutResult(res, len(b), limit), b
}

// cutResult is the cut copy of a result of total bytes: one text block,
// the start of the result's text (its text blocks, else its JSON) and the
// marker, the same isError, and _meta truncatedKey. It fits in limit bytes
// when limit leaves room for the marker; the text is cut at a rune
// boundary.
func cutResult(res *mcp.CallToolResult, total, limit int) json.RawMessage {
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if text == "" {
		b, _ := json.Marshal(res)
		text = string(b)
	}
	marker := "…[truncated: " + strconv.Itoa(total) + " bytes total]"
	encode := func(n int) json.RawMessage {
		cut := &mcp.CallToolResult{
			Meta:    mcp.Meta{truncatedKey: map[string]any{"originalBytes": total}},
			Content: []mcp.Content{&mcp.TextContent{Text: jsoncap.CutRunes(text, n) + marker}},
			IsError: res.IsError,
		}
		b, _ := json.Marshal(cut) // text and numbers always encode
		return b
	}
	// The longest start that fits: its encoding is at least as long as
	// itself, and grows with it.
	lo, hi := 0, min(len(text), limit)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(encode(mid)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return encode(lo)
}

// bgtaskCut is the record of a result that the Manager cut itself (a cut
// copy still longer than its cap): {"truncated":true,"original_bytes":N,
// "preview":"…"}.
type bgtaskCut struct {
	Truncated     bool   `json:"truncated"`
	OriginalBytes int    `json:"original_bytes"`
	Preview       string `json:"preview"`
}

// recordedResult turns a completed task's recorded result into a tool
// result, as JSON: the tool result it is, or, for one the Manager cut, a cut
// copy that says so.
func recordedResult(raw json.RawMessage) json.RawMessage {
	var cut bgtaskCut
	if json.Unmarshal(raw, &cut) == nil && cut.Truncated && cut.OriginalBytes > 0 {
		return cutResult(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: cut.Preview}}}, cut.OriginalBytes, len(cut.Preview)+512)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		if _, ok := obj["content"]; ok {
			return raw
		}
	}
	b, _ := json.Marshal(rawResult(raw)) // not a tool result: its JSON as text
	return b
}

// withRelatedTask adds the related task to a tool result's _meta, keeping
// the rest of it as it is, byte for byte.
func withRelatedTask(body json.RawMessage, id string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(m, &meta) // a result's _meta is an object
	}
	rel, err := json.Marshal(map[string]string{"taskId": id})
	if err != nil {
		return nil, err
	}
	meta[relatedTaskKey] = rel
	if obj["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}
