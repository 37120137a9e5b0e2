package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Catching up on settled records. A notification is heard only while the
// listener LISTENs: what settled while it was away (its connection
// dropped, or it LISTENs to nothing) would wake no idle Receiver, ever.
// So the Store keeps a position, a time by the database clock before
// which every settled record and posted notice was told to OnSettled, and
// reads what settled since with one indexed query: after every (re)connect
// of the listener, and every poll interval while it does not listen. While
// it listens, a marker it sends itself every poll interval (on the settled
// channel, in commit order with every other notification) moves the
// position on, so a catch-up after a drop reads at most about a poll
// interval's ends again (decision 724).

// horizonSQL is the time, by the database clock, before which every
// transaction still open on the database started: a row made terminal
// (terminal_at is the statement's clock_timestamp) or a notice posted
// (created_at is the transaction's start) by a transaction that commits
// later has a time at or after it. A session of another role shows no
// xact_start (without pg_read_all_stats): give a fleet's instances one
// role. A transaction open longer than $1 µs (the grace period: a pause
// longer than it fences the instance) does not hold it back, so that a
// session left open on the database does not make every catch-up read
// all that settled since it began.
const horizonSQL = `SELECT (extract(epoch FROM greatest(least(clock_timestamp(), min(xact_start)),
		clock_timestamp() - $1::bigint * interval '1 microsecond')) * 1000000)::bigint
	FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`

// settledSinceSQL reads the records made terminal and the notices posted
// (not yet taken) at or after $1 (microseconds since the Unix epoch):
// bgtask_tasks_aged and bgtask_notices_pending serve it. A notice comes
// with the id "-" and its key "-<notice id>".
const settledSinceSQL = `SELECT id, id, owner, (extract(epoch FROM terminal_at) * 1000000)::bigint
		FROM bgtask_tasks WHERE terminal_at >= 'epoch'::timestamptz + $1 * interval '1 microsecond'
	UNION ALL
	SELECT '-', '-' || id, owner, (extract(epoch FROM created_at) * 1000000)::bigint
		FROM bgtask_notices WHERE delivered_at IS NULL AND created_at >= 'epoch'::timestamptz + $1 * interval '1 microsecond'`

// markerPrefix starts the payload of a position marker on the settled
// channel: "+" and a horizon (horizonSQL). A release that does not know
// markers passes them to OnSettled as an id no record has.
const markerPrefix = "+"

// markerSQL notifies the settled channel with a marker of the horizon.
// $2 is the scope's settled channel.
var markerSQL = `SELECT pg_notify($2, '` + markerPrefix + `' || (` + horizonSQL + `))`

// settledCursor is the Store's position in what settled (see above).
type settledCursor struct {
	// listening reports whether the listener LISTENs on a live
	// connection; the poll catches up while it does not.
	listening atomic.Bool

	mu   sync.Mutex       // serializes catch-ups; guards from and told
	from int64            // the position, µs since the Unix epoch; 0 before the first
	told map[string]int64 // keys a catch-up told at or after from, with their times
}

// querier is a connection or a pool.
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// catchUp tells OnSettled's functions of what settled since the position
// that a catch-up has not told yet, reading on q, and moves the position
// to the horizon read first. With no function registered it only moves
// the position.
func (s *Store) catchUp(ctx context.Context, q querier) error {
	c := &s.cursor
	c.mu.Lock()
	defer c.mu.Unlock()
	var b pgx.Batch
	var horizon int64
	b.Queue(horizonSQL, s.cfg.grace.Microseconds()).QueryRow(func(r pgx.Row) error { return r.Scan(&horizon) })
	type settled struct {
		id, key, owner string
		at             int64
	}
	var got []settled
	listened := s.listened()
	if c.from != 0 && listened {
		b.Queue(settledSinceSQL, c.from).Query(func(rs pgx.Rows) error {
			var r settled
			_, err := pgx.ForEachRow(rs, []any{&r.id, &r.key, &r.owner, &r.at}, func() error {
				got = append(got, r)
				return nil
			})
			return err
		})
	}
	// One round trip; each statement reads with its own snapshot, taken
	// after the horizon's.
	if err := q.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("pgstore: catch up on settled records: %w", err)
	}
	if !listened && s.listened() {
		return nil // registered meanwhile: what settled since was not read, so the position stays
	}
	for _, r := range got {
		if _, ok := c.told[r.key]; ok {
			continue
		}
		if r.at >= horizon {
			if c.told == nil {
				c.told = make(map[string]int64)
			}
			c.told[r.key] = r.at
		}
		s.tell(r.id, r.owner)
	}
	c.advance(horizon)
	return nil
}

// advance moves the position to at, unless it is there already, and
// forgets what was told before it. c.mu is held.
func (c *settledCursor) advance(at int64) {
	if at <= c.from {
		return
	}
	c.from = at
	for k, t := range c.told {
		if t < at {
			delete(c.told, k)
		}
	}
}

// marked moves the position to the horizon a marker heard on the
// listening connection names: every notification committed before the
// marker was heard before it, and every record that settled before the
// horizon committed before the marker.
func (s *Store) marked(payload string) {
	at, err := strconv.ParseInt(strings.TrimPrefix(payload, markerPrefix), 10, 64)
	if err != nil {
		return // not one of ours
	}
	c := &s.cursor
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.from != 0 { // 0: the listener's first catch-up sets it
		c.advance(at)
	}
}

// pollSettled is the poll's part in what settled: a catch-up while the
// listener does not listen, else a marker that moves the position on.
func (s *Store) pollSettled(ctx context.Context) error {
	if !s.cursor.listening.Load() {
		return s.catchUp(ctx, s.bg)
	}
	if _, err := s.bg.Exec(ctx, markerSQL, s.cfg.grace.Microseconds(), s.scope.settled); err != nil {
		return fmt.Errorf("pgstore: mark the settled position: %w", err)
	}
	return nil
}

// listened reports whether a function is registered with OnSettled.
func (s *Store) listened() bool {
	s.settled.mu.Lock()
	defer s.settled.mu.Unlock()
	return len(s.settled.funcs) > 0
}
