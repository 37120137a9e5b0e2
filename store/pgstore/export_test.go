package pgstore

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// The statements a commit and the reaper run, for plan_test.go.
const (
	LockByIDSQL    = lockByIDSQL
	LockByOwnerSQL = lockByOwnerSQL
	RetainCountSQL = retainCountSQL
	RetainAgeSQL   = retainAgeSQL
	LockAgedSQL    = lockAgedSQL
	ListTaggedSQL  = listTaggedSQL
	ListSQL        = listSQL
)

// MigrationSQL is the statement that moves the schema from version v-1 to v.
func MigrationSQL(v int) string { return migrations[v-1] }

// ReapTasksSQL is the reaper's task query, for plan_test.go.
var ReapTasksSQL = reapTasksSQL

// The reaper's statements that address and readdress notices, for
// plan_test.go.
var (
	InsertNoticesSQL    = insertNoticesSQL
	ReaddressNoticesSQL = readdressNoticesSQL
	ReaddressReapedSQL  = readdressReapedSQL
)

// ReapBatch runs one reaper transaction, without the readdressing pass
// that Reap runs after the last one.
func ReapBatch(ctx context.Context, s *Store) (int, error) {
	return s.reapOnce(ctx, s.pool, map[string]bool{})
}

// FakeClock replaces s's clock with one that stands still until the
// returned function moves it on by d. Call it before Start.
func FakeClock(s *Store) (advance func(d time.Duration)) {
	var offset atomic.Int64
	s.clock = func() time.Time { return s.base.Add(time.Duration(offset.Load())) }
	return func(d time.Duration) { offset.Add(int64(d)) }
}

// WithoutNotifications makes the Store's listener LISTEN to nothing, as
// when notifications are lost: only the poll carries what crosses
// instances.
func WithoutNotifications() Option { return func(c *config) { c.deaf = true } }

// WithLoneCommitsAlone makes a lone commit take one round trip and no
// late arrivals, as before decision 801: the tests that build a group
// behind a lone commit that holds the transaction slot.
func WithLoneCommitsAlone() Option { return func(c *config) { c.loneAlone = true } }

// WithBeforeReconnect makes the Store's listener call f before each
// reconnect, after its connection dropped.
func WithBeforeReconnect(f func()) Option { return func(c *config) { c.relisten = f } }

// WithAfterPoll makes the Store's poller call f with the instance's id
// after each pass over its cancel requests and messages.
func WithAfterPoll(f func(instance string)) Option { return func(c *config) { c.afterPoll = f } }

// QueuedCommits is how many Commits wait for a group.
func QueuedCommits(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}

// Groups is how many groups of more than one Commit were committed in one
// transaction, and how many Commits they held.
func Groups(s *Store) (groups, commits int64) { return s.groups.Load(), s.grouped.Load() }

// MaxInFlight is how many commit transactions of a Store run at once
// while fewer than a full group wait.
const MaxInFlight = 1

// InsertOneFencedSQL is a started Store's statement for a spawn's commit,
// and OneArgs its arguments for m, less the instance.
const InsertOneFencedSQL = insertOneFencedSQL

func OneArgs(m *bgtype.TaskMeta) []any { return oneArgs(m) }

// UpdateOneCheckedFencedSQL is a started Store's statement for the
// completion of a record it wrote, and UpdateOneArgs its arguments for m
// at version, less the instance and the count.
const UpdateOneCheckedFencedSQL = updateOneCheckedFencedSQL

func UpdateOneArgs(m *bgtype.TaskMeta, version int64) []any {
	var w writes
	w.put(m, version)
	return updateOneArgs(&w.upd)
}

// HotStatements are the statements each commit connection prepares.
var HotStatements = hotStatements

// PreparedHot reports how many of HotStatements a connection of s's commit
// pool has prepared (in the server's pg_prepared_statements).
func PreparedHot(ctx context.Context, s *Store) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = ANY($1)`, hotStatements).Scan(&n)
	return n, err
}

// ExplainHot is the EXPLAIN (FORMAT JSON) of the generic plan of
// HotStatements[i], with NULL for every parameter, on a connection of s's
// commit pool: planned with that connection's settings, as the Store's
// own commits are. It prepares the statement under a name of its own and
// deallocates it afterwards.
func ExplainHot(ctx context.Context, s *Store, i int) ([]byte, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	name := fmt.Sprintf("explain_hot_%d", i)
	sd, err := conn.Conn().Prepare(ctx, name, hotStatements[i])
	if err != nil {
		return nil, err
	}
	defer conn.Conn().Deallocate(context.WithoutCancel(ctx), name)
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(sd.ParamOIDs)), ", ")
	var out []byte
	err = conn.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (FORMAT JSON) EXECUTE %s(%s)`, name, nulls)).Scan(&out)
	return out, err
}

// CachedCommits is how many commit transactions s wrote from the records
// it keeps, without reading their rows.
func CachedCommits(s *Store) int64 { return s.cached.Load() }

// CommitSetting is the setting name (plan_cache_mode, enable_seqscan) on
// a connection of s's commit pool.
func CommitSetting(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// LateCommits is how many Commits joined a group's open transaction
// after its first statements (opengroup.go).
func LateCommits(s *Store) int64 { return s.late.Load() }

// Deadlocks is how many of s's commit transactions (each committed again)
// and age passes PostgreSQL ended to break a deadlock.
func Deadlocks(s *Store) int64 { return s.deadlocks.Load() }

// SetAgeDue makes s's next commit that makes records terminal check the
// age limit (due), as a Store's first such commit does, or makes no
// commit check it until the next SetAgeDue(s, true) (once checked, the
// age limit is due again a second later).
func SetAgeDue(s *Store, due bool) {
	if due {
		s.ageNext.Store(0)
	} else {
		s.ageNext.Store(math.MaxInt64)
	}
}

// CleanUp runs the reaper's age clean-up once.
func CleanUp(ctx context.Context, s *Store) error { return s.cleanUp(ctx) }

// AgePasses is how many of s's age limit passes committed (age.go).
func AgePasses(s *Store) int64 { return s.agePasses.Load() }

// SetAfterOpen makes f run in each group's open transaction after the
// group's statements, before the late arrivals are taken. Set it before
// the commits it watches start.
func SetAfterOpen(s *Store, f func()) {
	if f == nil {
		s.afterOpen.Store(nil)
		return
	}
	s.afterOpen.Store(&f)
}

// SettledPosition is the time before which s told OnSettled of every
// record that settled (catchup.go), by the database clock; zero before
// the listener's first catch-up.
func SettledPosition(s *Store) time.Time {
	s.cursor.mu.Lock()
	defer s.cursor.mu.Unlock()
	if s.cursor.from == 0 {
		return time.Time{}
	}
	return time.UnixMicro(s.cursor.from)
}

// InstanceLockTakenSQL is a condition on a column id that holds when
// another session holds the instance lock of id in the connection's
// schema; it takes a free one for the transaction.
const InstanceLockTakenSQL = `NOT pg_try_advisory_xact_lock(hashtextextended('bgtask' || ` + suffixSQL + ` || ' instance ' || id, 0))`

// SettledChannel is the channel on which s's settled notifications and
// position markers go.
func SettledChannel(s *Store) string { return s.scope.settled }

// HoldKindLock takes, in a transaction on s's pool, the advisory lock that
// s's claims of kind take; release rolls the transaction back.
func HoldKindLock(ctx context.Context, s *Store, kind string) (release func(), err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, kindLockSQL, kind, s.scope.lock); err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	return func() { tx.Rollback(context.Background()) }, nil
}

// TryKindLock reports whether a transaction on s's pool takes the lock of
// kind that s's claims take at once; it rolls back.
func TryKindLock(ctx context.Context, s *Store, kind string) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var got bool
	err = tx.QueryRow(ctx, strings.Replace(kindLockSQL, "pg_advisory_xact_lock", "pg_try_advisory_xact_lock", 1), kind, s.scope.lock).Scan(&got)
	return got, err
}

// HandleCancels runs one read of the cancel requests that the poller of
// instance id makes, handing them to rt.
func HandleCancels(ctx context.Context, s *Store, rt store.Runtime, id string) error {
	return s.handleCancels(ctx, rt, id)
}

// Prelocks is how many of s's commit transactions locked the terminal
// counts of their statements first (prelock.go).
func Prelocks(s *Store) int64 { return s.prelocks.Load() }

// PrelockOwners is prelockOwners: the counts a transaction that holds held
// locks first before statements that change the counts of stmts' owners.
func PrelockOwners(held []string, stmts ...[]string) []string { return prelockOwners(held, stmts...) }
