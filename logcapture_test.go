package bgtask

import (
	"context"
	"log/slog"
	"sync"
)

// captureHandler records slog records for assertions.
type captureHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

// logged is one captured record, flattened.
type logged struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (h *captureHandler) records() []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]logged, 0, len(h.recs))
	for _, r := range h.recs {
		l := logged{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
		r.Attrs(func(a slog.Attr) bool {
			l.Attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, l)
	}
	return out
}

func newCapture() (*captureHandler, *slog.Logger) {
	h := &captureHandler{}
	return h, slog.New(h)
}

// find returns the records with the given level and message.
func (h *captureHandler) find(level slog.Level, msg string) []logged {
	var out []logged
	for _, r := range h.records() {
		if r.Level == level && r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}
