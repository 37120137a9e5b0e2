package bgmcp

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// WithRetainFor tells the Server how long the Manager's store keeps a
// task's record after the task ended (the store's own retention option,
// such as sqlitestore.WithRetainFor), so that the ttl the tasks protocol
// shows is what the store really keeps: for an ended task, the time from
// its creation to its end plus d, in milliseconds; for a task still
// running, null (its record is kept until it ends). A store also drops an
// owner's oldest ended records past its per-owner count (1,000 by
// default), so a record may go earlier than its ttl says. Defaults to
// 24 hours, the stores' default retention; d <= 0 makes NewServer fail.
func WithRetainFor(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(errors.New("bgmcp: WithRetainFor: the retention must be positive, got " + d.String()))
			return
		}
		c.results.retainFor = d
	}
}

// retention is the configured retention, or the default.
func (c resultConfig) retention() time.Duration {
	if c.retainFor > 0 {
		return c.retainFor
	}
	return defaultRetainFor
}

// defaultRetainFor is the stores' default retention (24 hours).
const defaultRetainFor = 24 * time.Hour

// info is the protocol view of one of o's tasks: infoOf, with the time of
// its last status change and its ttl.
func (s *Server) info(ctx context.Context, o bgtask.Owner, m bgtype.TaskMeta) taskInfo {
	v := infoOf(m)
	if m.Status.IsTerminal() {
		ttl := (m.FinishedAt.Sub(m.CreatedAt) + s.cfg.results.retention()).Milliseconds()
		v.TTL = &ttl
		return v
	}
	v.LastUpdatedAt = liveUpdate(m, lastAnswer(ctx, o, m.ID)).UTC().Format(time.RFC3339Nano)
	return v
}

// liveUpdate is when a live task last changed status: created, started,
// answered (answeredAt, zero if never), or, while it awaits input, asked
// (its newest open request). With one request open, its asking is always
// after the others (a request's time is known to the millisecond only: one
// made within the millisecond of the last change counts one microsecond
// after it); with several, an answer to one may come after the last ask.
func liveUpdate(m bgtype.TaskMeta, answeredAt time.Time) time.Time {
	t := lastUpdate(m)
	if answeredAt.After(t) {
		t = answeredAt
	}
	if open := m.OpenInputs(); m.Status == bgtype.StatusAwaitingInput && len(open) > 0 {
		asked, ok := inputTime(open[len(open)-1].ID)
		switch {
		case ok && asked.After(t):
			t = asked
		case len(open) == 1:
			t = t.Add(time.Microsecond)
		}
	}
	return t
}

// lastAnswer is when the last answer to an input request of a task reached
// it, from the Manager's message history; zero if none is known there.
func lastAnswer(ctx context.Context, o bgtask.Owner, id string) time.Time {
	msgs, err := o.Messages(ctx, id)
	if err != nil {
		return time.Time{}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Direction == bgtask.MessageIn && msgs[i].InReplyTo != "" {
			return msgs[i].At
		}
	}
	return time.Time{}
}

// inputTime is the time an input request was made, read from its id:
// "input_" and the 32 hex digits of a UUIDv7, whose first 48 bits are Unix
// milliseconds.
func inputTime(id string) (time.Time, bool) {
	hexID, ok := strings.CutPrefix(id, "input_")
	if !ok || len(hexID) != 32 {
		return time.Time{}, false
	}
	b, err := hex.DecodeString(hexID[:12])
	if err != nil {
		return time.Time{}, false
	}
	var ms int64
	for _, x := range b {
		ms = ms<<8 | int64(x)
	}
	return time.UnixMilli(ms), true
}
