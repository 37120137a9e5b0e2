package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

// startManager makes a Manager on s for instance id and starts s for it.
// The Manager is shut down before the store closes.
func startManager(t *testing.T, s *pgstore.Store, id string) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context(), m.Runtime()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// blockUntilCancelled is a task that runs until it is cancelled and
// reports the cause on causes.
func blockUntilCanceled(causes chan<- error) bgtask.Func {
	return func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		if causes != nil {
			causes <- context.Cause(ctx)
		}
		return nil, ctx.Err()
	}
}

func onInstance(m bgtype.TaskMeta, inst string) bgtype.TaskMeta {
	m.Instance = inst
	return m
}

func TestReapGoneInstance(t *testing.T) {
	t.Parallel()
	// The fixture is dated against a grace of an hour: "ghost" stopped
	// heartbeating a day ago, "alive2" now. However slow the machine, the
	// test cannot last an hour, so no real time is measured.
	s, dsn := openStore(t, pgstore.WithGrace(time.Hour))
	ctx := t.Context()
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 day', now() - interval '2 days', 'alive'),
		('alive2', now(), now(), 'alive')`)
	g1 := onInstance(rec("task_g1", "alice", bgtype.StatusRunning), "ghost")
	g2 := onInstance(rec("task_g2", "alice", bgtype.StatusAwaitingInput), "ghost")
	g2.CreatedAt = t0.Add(time.Minute)
	g2.Input = &bgtype.InputRequest{ID: "input_1", Prompt: "?"}
	g3 := onInstance(rec("task_g3", "bob", bgtype.StatusQueued), "ghost")
	g4 := onInstance(rec("task_g4", "alice", bgtype.StatusCompleted), "ghost")
	a1 := onInstance(rec("task_a1", "alice", bgtype.StatusRunning), "alive2")
	if err := s.Commit(ctx, "alice", store.UpsertAction(g1), store.UpsertAction(g2), store.UpsertAction(g4), store.UpsertAction(a1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "bob", store.UpsertAction(g3)); err != nil {
		t.Fatal(err)
	}
	n, err := s.Reap(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Reap = %d, %v; want 3", n, err)
	}
	for _, want := range []bgtype.TaskMeta{g1, g2, g3} {
		got, err := s.Get(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != bgtype.StatusInterrupted || got.Attempt != want.Attempt+1 || got.FinishedAt.IsZero() ||
			!strings.Contains(got.Error, `the runtime that ran it (instance "ghost") is gone`) || got.Input != nil || got.Instance != "ghost" {
			t.Fatalf("%s after reap: %+v", want.ID, got)
		}
	}
	for _, keep := range []bgtype.TaskMeta{g4, a1} {
		if got, _ := s.Get(ctx, keep.ID); !reflect.DeepEqual(got, keep) {
			t.Fatalf("%s changed by the reaper: %+v", keep.ID, got)
		}
	}
	evs, err := s.TakeNotices(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		if ev.Kind != bgtype.EventInterrupted || ev.ErrorKind != bgtype.KindInterrupted || !strings.Contains(ev.Error, `"ghost"`) {
			t.Fatalf("notice %+v", ev)
		}
		ids = append(ids, ev.TaskID)
	}
	if !slices.Equal(ids, []string{"task_g1", "task_g2"}) {
		t.Fatalf("alice's notices = %v, want g1, g2 in creation order", ids)
	}
	if evs, err := s.TakeNotices(ctx, "alice"); err != nil || len(evs) != 0 {
		t.Fatalf("second TakeNotices = %v, %v; want none", evs, err)
	}
	if evs, err := s.TakeNotices(ctx, "bob"); err != nil || len(evs) != 1 || evs[0].TaskID != "task_g3" {
		t.Fatalf("bob's notices = %v, %v", evs, err)
	}
	if n, err := s.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("second Reap = %d, %v; want 0", n, err)
	}

	// A late write from the reaped instance changes nothing: the attempt
	// fence drops it (and the record is terminal anyway).
	before, _ := s.Get(ctx, "task_g1")
	late := g1
	late.Status, late.Result, late.FinishedAt = bgtype.StatusCompleted, []byte(`"late"`), t0.Add(time.Hour)
	if err := s.Commit(ctx, "alice", store.UpsertAction(late)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "task_g1"); !reflect.DeepEqual(got, before) {
		t.Fatalf("late write changed the record:\n%+v\nwas\n%+v", got, before)
	}
	if n := sqlExec(t, dsn, `UPDATE bgtask_tasks SET version = version WHERE id = 'task_g1' AND version = 2`); n != 1 {
		t.Fatal("late write bumped the version")
	}
	// A task the dead instance inserts late is reaped on the next pass.
	if err := s.Commit(ctx, "alice", store.UpsertAction(onInstance(rec("task_g5", "alice", bgtype.StatusRunning), "ghost"))); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("Reap of a late insert = %d, %v", n, err)
	}
}

// Two reapers and two claimers at once: every task is reported once, and
// every notice delivered once.
func TestConcurrentReapersAndClaimers(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t)
	ctx := t.Context()
	sqlExec(t, dsn, `INSERT INTO bgtask_instances VALUES ('ghost', now() - interval '1 hour', now() - interval '1 hour', 'alive')`)
	const n = 60
	var acts []store.Action
	for i := range n {
		m := onInstance(rec(fmt.Sprintf("task_%03d", i), "alice", bgtype.StatusRunning), "ghost")
		m.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		acts = append(acts, store.UpsertAction(m))
	}
	if err := s.Commit(ctx, "alice", acts...); err != nil {
		t.Fatal(err)
	}
	s2, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		reaped int
		seen   = map[string]int{}
	)
	for _, st := range []*pgstore.Store{s, s2, s, s2} {
		wg.Go(func() {
			k, err := st.Reap(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			reaped += k
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, st := range []*pgstore.Store{s, s2, s, s2} {
		wg.Go(func() {
			for {
				evs, err := st.TakeNotices(ctx, "alice")
				if err != nil {
					t.Error(err)
					return
				}
				if len(evs) == 0 {
					return
				}
				mu.Lock()
				prev := ""
				for _, ev := range evs {
					seen[ev.TaskID]++
					if ev.TaskID <= prev {
						t.Errorf("notices out of order: %s after %s", ev.TaskID, prev)
					}
					prev = ev.TaskID
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if reaped != n || len(seen) != n {
		t.Fatalf("reaped %d, notices for %d tasks; want %d each", reaped, len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s delivered %d times", id, k)
		}
	}
}

func TestLostInstanceStopsWriting(t *testing.T) {
	t.Parallel()
	// A grace of an hour: only the state the test writes can make the
	// instance lost, never a slow heartbeat.
	s, dsn := openStore(t, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour))
	m := startManager(t, s, "inst_lost")
	causes := make(chan error, 1)
	id, err := m.Owner("alice").Spawn(t.Context(), blockUntilCanceled(causes))
	if err != nil {
		t.Fatal(err)
	}
	// Another instance's reaper declared it dead (as after a long pause).
	sqlExec(t, dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_lost'`)
	select {
	case cause := <-causes:
		if !errors.Is(cause, bgtask.ErrInstanceLost) {
			t.Fatalf("task cancelled with cause %v, want ErrInstanceLost", cause)
		}
	case <-time.After(hangGuard):
		t.Fatal("task not cancelled after the instance was declared dead")
	}
	if !s.Lost() {
		t.Fatal("Lost() = false")
	}
	err = s.Commit(t.Context(), "alice", store.UpsertAction(rec("task_new", "alice", bgtype.StatusRunning)))
	if !errors.Is(err, bgtask.ErrInstanceLost) || !errors.Is(err, pgstore.ErrInstanceLost) {
		t.Fatalf("Commit after loss = %v", err)
	}
	// The task's own end (cancelled) is refused, and the lost store's
	// reaper stops; another instance's reaper turns the record interrupted.
	if _, err := s.Reap(t.Context()); !errors.Is(err, bgtask.ErrInstanceLost) {
		t.Fatalf("Reap on the lost store = %v, want ErrInstanceLost", err)
	}
	other, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waitFor(t, "the lost instance's task reaped", func() bool {
		if _, err := other.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(t.Context(), id)
		if err != nil || got.Status == bgtype.StatusCanceled {
			t.Fatalf("the lost instance's record = %+v, %v", got, err)
		}
		return got.Status == bgtype.StatusInterrupted && got.Attempt == 1
	})
}

func TestCancelReachesOtherInstance(t *testing.T) {
	t.Parallel()
	for _, killListener := range []bool{false, true} {
		t.Run(fmt.Sprintf("killListener=%v", killListener), func(t *testing.T) {
			// A cannot reconnect its listener within the test when it is
			// killed, so only the poller can carry the request; without the
			// kill the poll interval is too long to matter, so NOTIFY does.
			poll := time.Hour
			if killListener {
				poll = 100 * time.Millisecond
			}
			sa, dsn := openStore(t, pgstore.WithPollInterval(poll), pgstore.WithReconnectBackoff(time.Hour, time.Hour))
			sb, err := pgstore.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Close() })
			ma := startManager(t, sa, "inst_a")
			mb := startManager(t, sb, "inst_b")
			listener := func() int64 {
				return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_a")
			}
			waitFor(t, "A listens", func() bool { return listener() == 1 })
			if killListener {
				if n := sqlExec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_a"); n != 1 {
					t.Fatalf("terminated %d listeners", n)
				}
				waitFor(t, "A's listener gone", func() bool { return listener() == 0 })
			}
			id, err := ma.Owner("alice").Spawn(t.Context(), blockUntilCanceled(nil))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := mb.Cancel(t.Context(), id); err != nil || n != 1 {
				t.Fatalf("B cancels A's task: %d, %v", n, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
			defer cancel()
			got, err := ma.Wait(ctx, id)
			if err != nil || got.Status != bgtype.StatusCanceled {
				t.Fatalf("A's task = %+v, %v; want cancelled", got, err)
			}
			if killListener && listener() != 0 {
				t.Fatal("the listener came back: the poller was not what delivered the request")
			}
			if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_cancel_requests WHERE task_id = $1 AND handled_at IS NOT NULL`, id); n != 1 {
				t.Fatalf("%d handled requests, want 1", n)
			}
		})
	}
}

// A started store's reaper drops what the age limit lets go, and keeps
// what is younger.
func TestAgeCleanUp(t *testing.T) {
	t.Parallel()
	s, dsn := openStore(t, pgstore.WithHeartbeatInterval(50*time.Millisecond), pgstore.WithGrace(time.Hour), pgstore.WithRetainFor(time.Hour))
	pgstore.SetAgeDue(s, false) // the clean-up deletes task_old, not a commit's age pass
	old := rec("task_old", "alice", bgtype.StatusCompleted)
	young := rec("task_young", "alice", bgtype.StatusCompleted)
	if err := s.Commit(t.Context(), "alice", store.UpsertAction(old), store.UpsertAction(young)); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, dsn, `UPDATE bgtask_tasks SET terminal_at = now() - interval '1 day' WHERE id = 'task_old';
		INSERT INTO bgtask_instances VALUES ('gone', now() - interval '1 day', now() - interval '2 days', 'stopped');
		INSERT INTO bgtask_notices (owner, event, delivered_at) VALUES
			('alice', '{"kind":"cancelled","task_id":"task_x"}', now() - interval '1 day'),
			('alice', '{"kind":"cancelled","task_id":"task_y"}', now());
		INSERT INTO bgtask_cancel_requests (task_id, instance, tree, requested_at, handled_at) VALUES
			('task_x', 'gone', false, now() - interval '2 days', now() - interval '1 day'),
			('task_x', 'gone', false, now() - interval '2 days', NULL),
			('task_y', 'inst_clean', false, now(), now())`)
	startManager(t, s, "inst_clean")
	count := func(sql string) int64 { return sqlExec(t, dsn, sql) }
	waitFor(t, "clean-up", func() bool {
		return count(`SELECT 1 FROM bgtask_tasks WHERE id = 'task_old'`) == 0
	})
	for _, c := range []struct {
		sql  string
		want int64
	}{
		{`SELECT 1 FROM bgtask_tasks`, 1},
		{`SELECT 1 FROM bgtask_notices`, 1},
		{`SELECT 1 FROM bgtask_cancel_requests`, 1},
		{`SELECT 1 FROM bgtask_instances WHERE id = 'gone'`, 0},
		{`SELECT 1 FROM bgtask_instances WHERE id = 'inst_clean'`, 1},
	} {
		if got := count(c.sql); got != c.want {
			t.Errorf("%s: %d rows, want %d", c.sql, got, c.want)
		}
	}
}
