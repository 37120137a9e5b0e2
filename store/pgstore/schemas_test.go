package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// oddSchema is a schema name that needs quoting everywhere: a quote, a
// space, a semicolon and a letter beyond ASCII.
const oddSchema = `fleet "b"; ü`

// schemaDSN returns dsn with its search_path set to schema, which it
// creates in dsn's database (unless it is public) and drops, with what is
// in it, when the test ends (public is made again, empty).
func schemaDSN(t *testing.T, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", pgx.Identifier{schema}.Sanitize())
	// pgx reads a URL's query with PathUnescape: "+" stays a plus.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	name := pgx.Identifier{schema}.Sanitize()
	if schema != "public" {
		sqlExec(t, dsn, "CREATE SCHEMA "+name)
	}
	t.Cleanup(func() {
		drop := "DROP SCHEMA " + name + " CASCADE"
		if schema == "public" {
			drop += "; CREATE SCHEMA public"
		}
		sqlExec(t, dsn, drop)
	})
	return u.String()
}

// openOn opens a Store on dsn, closed when the test ends.
func openOn(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	return openMore(t, dsn, "", pgstore.WithPollInterval(time.Hour))
}

// settledLog records what OnSettled tells a Store.
type settledLog struct {
	mu  sync.Mutex
	ids []string
	got chan struct{}
}

func listenSettled(s *pgstore.Store) *settledLog {
	l := &settledLog{got: make(chan struct{}, 1)}
	s.OnSettled(func(id, _ string) {
		l.mu.Lock()
		l.ids = append(l.ids, id)
		l.mu.Unlock()
		select {
		case l.got <- struct{}{}:
		default:
		}
	})
	return l
}

func (l *settledLog) heard() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

// waitHeard waits until l heard id, failing at the hang guard.
func (l *settledLog) waitHeard(t *testing.T, id string) {
	t.Helper()
	for !slices.Contains(l.heard(), id) {
		select {
		case <-l.got:
		case <-guard(t).Done():
			t.Fatalf("%s not heard within %v (heard %q)", id, hangGuard, l.heard())
		}
	}
}

// finish spawns a task of alice's on m that completes at once and waits
// for its end.
func finish(t *testing.T, m *bgtask.Manager) string {
	t.Helper()
	ctx := guard(t)
	id, err := m.Owner("alice").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "done", nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Wait(ctx, id); err != nil || got.Status != bgtype.StatusCompleted {
		t.Fatalf("Wait = %s, %v", got.Status, err)
	}
	return id
}

// Two fleets in two schemas of one database do not meet: each may run an
// instance id the other runs, a kind lock of one does not hold the
// other's claims, and neither hears the other's ends or position
// markers (decision 800).
func TestSchemasOfOneDatabaseKeepApart(t *testing.T) {
	t.Parallel()
	dsnA := pgtest.NewDSN(t)
	dsnB := schemaDSN(t, dsnA, oddSchema)
	sa, sb := openOn(t, dsnA), openOn(t, dsnB)
	heardB := listenSettled(sb)
	ma := startManagerWith(t, sa, "inst_a")
	mb := startManagerWith(t, sb, "inst_a") // fails with ErrInstanceRunning if the lock is shared

	ctx := guard(t)
	release, err := pgstore.HoldKindLock(ctx, sa, "k")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgstore.TryKindLock(ctx, sb, "k")
	release()
	if err != nil || !got {
		t.Errorf("B's kind lock with A's held = %v, %v; want true", got, err)
	}

	// A's end and a marker of A's far ahead, then B's end: B hears them
	// in commit order, so by B's end it would have heard A's.
	idA := finish(t, ma)
	sqlExec(t, dsnA, `SELECT pg_notify($1, '+4102444800000000')`, pgstore.SettledChannel(sa)) // 2100-01-01
	idB := finish(t, mb)
	heardB.waitHeard(t, idB)
	if got := heardB.heard(); slices.Contains(got, idA) {
		t.Errorf("B heard A's end %s: %q", idA, got)
	}
	if pos := pgstore.SettledPosition(sb); pos.Year() >= 2100 {
		t.Fatalf("B's settled position = %v: A's marker moved it", pos)
	}
}

// Two Stores on one schema are one fleet: the second cannot run the
// first's instance id, a kind lock of one holds the other, and each hears
// the other's ends.
func TestOneSchemaIsOneFleet(t *testing.T) {
	t.Parallel()
	dsn := schemaDSN(t, pgtest.NewDSN(t), oddSchema)
	sa, sb, sc := openOn(t, dsn), openOn(t, dsn), openOn(t, dsn)
	heardB := listenSettled(sb)
	ma := startManagerWith(t, sa, "inst_a")
	startManagerWith(t, sb, "inst_b")

	m, err := bgtask.New(bgtask.WithStore(sc), bgtask.WithInstance("inst_a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(t.Context(), m.Runtime()); !errors.Is(err, pgstore.ErrInstanceRunning) {
		t.Fatalf("Start of A's id in its schema = %v, want ErrInstanceRunning", err)
	}

	ctx := guard(t)
	release, err := pgstore.HoldKindLock(ctx, sa, "k")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgstore.TryKindLock(ctx, sb, "k")
	release()
	if err != nil || got {
		t.Fatalf("B's kind lock with A's held = %v, %v; want false", got, err)
	}

	idA := finish(t, ma)
	heardB.waitHeard(t, idA)
}

// nextNotice waits for conn's next notification and returns its channel
// and payload.
func nextNotice(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	n, err := conn.WaitForNotification(guard(t))
	if err != nil {
		t.Fatalf("wait for a notification: %v", err)
	}
	return n.Channel + " " + n.Payload
}

// In the public schema a Store keeps the channels and lock keys of the
// releases before schemas were told apart, so old and new processes of a
// fleet there work side by side during a deploy: an old listener hears a
// new Store's ends and cancel requests, a new Store hears an old one's
// notifications, and an instance lock or kind lock of either holds the
// other (decision 800). The old release is simulated with its SQL.
func TestPublicSchemaKeepsTheOldNamesAndKeys(t *testing.T) {
	t.Parallel()
	dsn := schemaDSN(t, pgtest.NewDSN(t), "public")
	s := openOn(t, dsn)
	heard := listenSettled(s)
	m := startManagerWith(t, s, "inst_a")
	if got := pgstore.SettledChannel(s); got != "bgtask_settled" {
		t.Fatalf("settled channel in public = %q, want bgtask_settled", got)
	}
	ctx := guard(t)

	old := sqlConn(t, dsn)
	var got bool
	if err := old.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('bgtask instance ' || 'inst_a', 0))`).Scan(&got); err != nil || got {
		t.Fatalf("old release's try of inst_a's lock = %v, %v; want false", got, err)
	}
	release, err := pgstore.HoldKindLock(ctx, s, "k")
	if err != nil {
		t.Fatal(err)
	}
	err = old.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended('bgtask kind ' || 'k', 0))`).Scan(&got)
	release()
	if err != nil || got {
		t.Fatalf("old release's try of kind k's lock = %v, %v; want false", got, err)
	}

	if _, err := old.Exec(ctx, `LISTEN bgtask_settled; LISTEN bgtask_cancel`); err != nil {
		t.Fatal(err)
	}
	id := finish(t, m)
	if got, want := nextNotice(t, old), "bgtask_settled "+id+" alice"; got != want {
		t.Fatalf("old listener heard %q, want %q", got, want)
	}
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, instance) VALUES ('task_old', 'alice', 'running', now(), 'inst_old')`)
	if err := s.RequestCancel(ctx, "task_old", false, "stop"); err != nil {
		t.Fatal(err)
	}
	if got, want := nextNotice(t, old), "bgtask_cancel inst_old"; got != want {
		t.Fatalf("old listener heard %q, want %q", got, want)
	}
	sqlExec(t, dsn, `SELECT pg_notify('bgtask_settled', 'task_old alice')`)
	heard.waitHeard(t, "task_old")
}

// keyedSettled is the version whose migration sends the settled
// notification on the channel of the table's schema.
const keyedSettled = 14

// A database of the version before, in a schema other than public, moves
// its settled trigger to the schema's channel: an end written by hand
// there is heard on it, not on the channel of public (decision 800).
func TestMigrationKeysTheSettledTrigger(t *testing.T) {
	t.Parallel()
	dsn := schemaDSN(t, pgtest.NewDSN(t), oddSchema)
	migrateTo(t, dsn, keyedSettled-1)
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at) VALUES ('task_old', 'alice', 'running', now())`)
	s := openOn(t, dsn)
	ch := pgstore.SettledChannel(s)
	if !regexp.MustCompile(`^bgtask_settled_[0-9a-f]{16}$`).MatchString(ch) {
		t.Fatalf("settled channel of %q = %q, want bgtask_settled_ and 16 hex digits", oddSchema, ch)
	}
	ctx := guard(t)
	conn := sqlConn(t, dsn)
	if _, err := conn.Exec(ctx, `LISTEN bgtask_settled; LISTEN `+pgx.Identifier{ch}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET status = 'completed', terminal_at = now() WHERE id = 'task_old'`)
	sqlExec(t, dsn, `SELECT pg_notify('bgtask_settled', 'fence')`)
	for _, want := range []string{ch + " task_old alice", "bgtask_settled fence"} {
		if got := nextNotice(t, conn); got != want {
			t.Fatalf("heard %q, want %q", got, want)
		}
	}
}

// A Store in a schema other than public sends its cancel requests,
// notices and messages on its schema's channels only: a listener on the
// channels of public (another fleet, or a release before, there) hears
// none of them (decision 800).
func TestSchemaSendsOnItsOwnChannels(t *testing.T) {
	t.Parallel()
	dsn := schemaDSN(t, pgtest.NewDSN(t), oddSchema)
	s := openOn(t, dsn)
	ctx := guard(t)
	conn := sqlConn(t, dsn)
	var suffix string
	if err := conn.QueryRow(ctx, `SELECT substr($1, length('bgtask_settled') + 1)`, pgstore.SettledChannel(s)).Scan(&suffix); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^_[0-9a-f]{16}$`).MatchString(suffix) {
		t.Fatalf("suffix of %q's channels = %q, want _ and 16 hex digits", oddSchema, suffix)
	}
	var listen strings.Builder
	for _, ch := range []string{"bgtask_cancel", "bgtask_settled", "bgtask_message", "bgtask_message_done"} {
		listen.WriteString("LISTEN " + ch + "; LISTEN " + ch + suffix + ";")
	}
	if _, err := conn.Exec(ctx, listen.String()); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `INSERT INTO bgtask_tasks (id, owner, status, created_at, instance) VALUES ('task_x', 'alice', 'running', now(), 'inst_x')`)
	if err := s.RequestCancel(ctx, "task_x", false, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := s.PostNotices(ctx, "alice", "inst_x", []bgtype.Event{{Kind: bgtype.EventCompleted, TaskID: "task_y"}}); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() {
		_, err := s.SendMessage(sctx, "bob", "task_x", bgtype.Message{From: "bob", Content: "hi"})
		sent <- err
	}()
	want := []string{
		"bgtask_cancel" + suffix + " inst_x",
		"bgtask_settled" + suffix + " - 6:inst_xalice",
		"bgtask_message" + suffix + " inst_x",
	}
	var got []string
	for range want {
		got = append(got, nextNotice(t, conn))
	}
	stop()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("SendMessage after its ctx ended = %v, want context.Canceled", err)
	}
	sqlExec(t, dsn, `SELECT pg_notify('bgtask_settled', 'fence')`)
	got = append(got, nextNotice(t, conn))
	if want = append(want, "bgtask_settled fence"); !slices.Equal(got, want) {
		t.Fatalf("heard %q, want %q", got, want)
	}
}
