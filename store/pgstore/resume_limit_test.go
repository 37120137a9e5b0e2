package pgstore_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/gstate"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// limitRig is a kind limit/v1 that counts, in one shared atomic, the
// attempts running at once on every instance of the test.
type limitRig struct {
	running, most atomic.Int64
	mu            sync.Mutex
	runs          map[string]int           // task id -> attempts that ran its function
	gates         map[string]chan struct{} // task id -> closed: that attempt returns
	started       chan string
}

// newLimitRig is a limitRig whose started channel holds n starts.
func newLimitRig(n int) *limitRig {
	return &limitRig{runs: map[string]int{}, gates: map[string]chan struct{}{}, started: make(chan string, n)}
}

// kind is the rig's kind, limit/v1, running r.fn with at most maxRunning
// tasks across the fleet (0: no limit).
func (r *limitRig) kind(t *testing.T, maxRunning int) *bgtask.Kind[stepsSpec, stepsCursor] {
	t.Helper()
	k, err := bgtask.NewKind("limit/v1", r.fn, bgtask.KindConfig{MaxRunning: maxRunning})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (r *limitRig) gate(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gates[id]
	if g == nil {
		g = make(chan struct{})
		r.gates[id] = g
	}
	return g
}

func (r *limitRig) fn(ctx context.Context, tk *bgtask.Task, _ stepsSpec, _ *bgtask.Checkpoint[stepsCursor]) (any, error) {
	n := r.running.Add(1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	r.mu.Lock()
	r.runs[tk.ID()]++
	r.mu.Unlock()
	r.started <- tk.ID()
	defer r.running.Add(-1) // before the end is recorded: the slot frees after
	select {
	case <-r.gate(tk.ID()):
		return "done", nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// limitInstance is a started pgstore instance whose Manager runs kinds.
func limitInstance(t *testing.T, dsn, id string, kinds ...bgtask.Runner) (*pgstore.Store, *bgtask.Manager) {
	t.Helper()
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(id), bgtask.WithKinds(kinds...))
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
			t.Errorf("Shutdown %s: %v", id, err)
		}
		s.Close()
	})
	return s, m
}

// TestKindMaxRunningFleet: 40 re-queued tasks of a kind with MaxRunning 3,
// claimed by 4 instances at once (explicit passes side by side, and each
// instance's own claim loop): each task runs once, never more than 3 run
// at once across the fleet, exactly 3 whenever 3 or more wait, and all
// complete.
func TestKindMaxRunningFleet(t *testing.T) {
	t.Parallel()
	const (
		n     = 40
		limit = 3
	)
	dsn := pgtest.NewDSN(t)
	// inst_a runs the kind without a limit and dies: its tasks are re-queued.
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	ka, err := bgtask.NewKind("limit/v1", func(ctx context.Context, _ *bgtask.Task, _ stepsSpec, _ *bgtask.Checkpoint[stepsCursor]) (any, error) {
		select {
		case <-held:
		case <-ctx.Done():
		}
		return nil, nil
	}, bgtask.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, ma := limitInstance(t, dsn, "inst_a", ka)
	var ids []string
	for range n {
		id, err := ka.Spawn(t.Context(), ma.Owner("alice"), stepsSpec{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	killInstance(t, dsn, "inst_a")
	r := newLimitRig(n)
	kb := r.kind(t, limit)
	var fleet []*bgtask.Manager
	var sb *pgstore.Store
	for _, id := range []string{"inst_b", "inst_c", "inst_d", "inst_e"} {
		s, m := limitInstance(t, dsn, id, kb)
		fleet, sb = append(fleet, m), s
	}
	reapN(t, sb, n)
	var inflight []string
	for finished := 0; finished < n; {
		var wg sync.WaitGroup
		for _, m := range fleet {
			wg.Go(func() {
				if _, err := m.ClaimWaiting(t.Context()); err != nil {
					t.Errorf("ClaimWaiting %s: %v", m.Instance(), err)
				}
			})
		}
		wg.Wait()
		for want := min(limit, n-finished); len(inflight) < want; {
			select {
			case id := <-r.started:
				inflight = append(inflight, id)
			case <-time.After(hangGuard):
				t.Fatalf("%d running after the claims, want %d", len(inflight), want)
			}
		}
		if got := r.running.Load(); got != int64(len(inflight)) || got > limit {
			t.Fatalf("%d running, %d started; limit %d", got, len(inflight), limit)
		}
		id := inflight[0]
		inflight = inflight[1:]
		close(r.gate(id))
		if meta := waitDone(t, fleet[0], id); meta.Status != bgtype.StatusCompleted || meta.Attempt != 2 {
			t.Fatalf("%s: %+v", id, meta)
		}
		finished++
	}
	select {
	case id := <-r.started:
		t.Fatalf("%s started after all ended", id)
	default:
	}
	if got := r.most.Load(); got != limit {
		t.Fatalf("at most %d ran at once, want %d", got, limit)
	}
	byInstance := map[string]int{}
	for _, id := range ids {
		meta, err := fleet[0].Get(t.Context(), id)
		if err != nil || meta.Status != bgtype.StatusCompleted || r.runs[id] != 1 {
			t.Fatalf("%s: %+v %v, ran %d times", id, meta, err, r.runs[id])
		}
		byInstance[meta.Instance]++
	}
	t.Logf("claims by instance: %v", byInstance)
}

// TestKindMaxRunningSpawnQueued: a spawn of a kind with MaxRunning on
// pgstore goes through the queue: with the limit (2) running, 2 more spawns
// wait (queued, no instance) and another instance claims them as slots free.
func TestKindMaxRunningSpawnQueued(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	r := newLimitRig(4)
	k := r.kind(t, 2)
	_, ma := limitInstance(t, dsn, "inst_a", k)
	_, mb := limitInstance(t, dsn, "inst_b", k)
	var ids []string
	for range 4 {
		id, err := k.Spawn(t.Context(), ma.Owner("alice"), stepsSpec{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	first := []string{<-r.started, <-r.started}
	if first[0] == first[1] || !slices.Contains(ids[:2], first[0]) || !slices.Contains(ids[:2], first[1]) {
		t.Fatalf("started %v, want the first two of %v", first, ids)
	}
	for _, id := range ids[2:] {
		meta, err := ma.Get(t.Context(), id)
		if err != nil || meta.Status != bgtype.StatusQueued || meta.Instance != "" || meta.Attempt != 1 {
			t.Fatalf("%s over the limit: %+v %v", id, meta, err)
		}
	}
	for i, id := range ids {
		close(r.gate(id))
		waitDone(t, ma, id)
		if i < 2 {
			if _, err := mb.ClaimWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := <-r.started; got != ids[i+2] && got != ids[3] {
				t.Fatalf("started %s, want one of %v", got, ids[2:])
			}
		}
	}
	for _, id := range ids {
		meta, err := mb.Get(t.Context(), id)
		if err != nil || meta.Status != bgtype.StatusCompleted || meta.Attempt != 1 || r.runs[id] != 1 {
			t.Fatalf("%s: %+v %v, ran %d", id, meta, err, r.runs[id])
		}
	}
	if r.most.Load() != 2 {
		t.Fatalf("at most %d at once, want 2", r.most.Load())
	}
}

// TestClaimLeftToInstanceWithRoom: an instance at its Limits.MaxConcurrent
// does not claim a re-queued task (it would fail it, or hold it queued
// here); the task waits, untouched, and an instance with room claims it.
func TestClaimLeftToInstanceWithRoom(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	r := newLimitRig(2)
	k := r.kind(t, 0)
	_, ma := limitInstance(t, dsn, "inst_a", k)
	id, err := k.Spawn(t.Context(), ma.Owner("alice"), stepsSpec{})
	if err != nil {
		t.Fatal(err)
	}
	<-r.started
	killInstance(t, dsn, "inst_a")
	sb, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := bgtask.New(bgtask.WithStore(sb), bgtask.WithInstance("inst_b"), bgtask.WithKinds(k), bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Start(t.Context(), mb.Runtime()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		mb.Shutdown(ctx)
		sb.Close()
	})
	busy, err := mb.Owner("bob").Spawn(t.Context(), func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	reapN(t, sb, 1)
	if n, err := mb.ClaimWaiting(t.Context()); n != 0 || err != nil {
		t.Fatalf("ClaimWaiting at the limit = %d, %v; want 0, nil", n, err)
	}
	// A pass of mb's own claim loop that saw room before busy took the slot
	// may claim the record once the Reap queued it; its start then finds no
	// slot and puts it back as a yield (the next attempt, costing none). So
	// the record is waited for, queued with no instance, its counted attempt
	// still 2, rather than read once.
	var meta bgtype.TaskMeta
	waitFor(t, "the record queued, no instance, counted attempt 2", func() bool {
		meta, err = mb.Get(t.Context(), id)
		return err == nil && meta.Status == bgtype.StatusQueued && meta.Instance == "" && meta.Resume.Counted(meta.Attempt) == 2
	})
	_, mc := limitInstance(t, dsn, "inst_c", k)
	mc.ClaimWaiting(t.Context()) // or its claim loop first
	if got := <-r.started; got != id {
		t.Fatalf("started %s, want %s", got, id)
	}
	close(r.gate(id))
	if meta := waitDone(t, mc, id); meta.Status != bgtype.StatusCompleted || meta.Instance != "inst_c" || meta.Resume.Counted(meta.Attempt) != 2 {
		t.Fatalf("%+v", meta)
	}
	if _, err := mb.Owner("bob").Cancel(t.Context(), busy); err != nil {
		t.Fatal(err)
	}
}

// TestUnclaimedEndedOnce: 30 records of a kind nobody registers, long
// overdue, found by 4 instances at once: each record ends failed once,
// and is told once (one landed end in all the instances' counts).
func TestUnclaimedEndedOnce(t *testing.T) {
	t.Parallel()
	const n = 30
	dsn := pgtest.NewDSN(t)
	other, err := bgtask.NewKind("other/v1", func(context.Context, *bgtask.Task, struct{}, *bgtask.Checkpoint[struct{}]) (any, error) {
		return nil, nil
	}, bgtask.KindConfig{UnclaimedAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var fleet []*bgtask.Manager
	var s0 *pgstore.Store
	for _, id := range []string{"inst_b", "inst_c", "inst_d", "inst_e"} {
		s, m := limitInstance(t, dsn, id, other)
		fleet = append(fleet, m)
		if s0 == nil {
			s0 = s
		}
	}
	then := time.Now().Add(-time.Hour)
	acts := make([]store.Action, n)
	for i := range acts {
		acts[i] = store.UpsertAction(bgtype.TaskMeta{ID: idgen.NewTask(then), Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusQueued,
			CreatedAt: then, Attempt: 2, Resume: &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: then}})
	}
	if err := s0.Commit(t.Context(), "alice", acts...); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, m := range fleet {
		wg.Go(func() {
			if _, err := m.ClaimWaiting(t.Context()); err != nil {
				t.Errorf("ClaimWaiting: %v", err)
			}
		})
	}
	wg.Wait()
	for _, a := range acts {
		meta, err := fleet[0].Get(t.Context(), a.Tasks[0].ID)
		if err != nil || meta.Status != bgtype.StatusFailed || !strings.HasPrefix(meta.Error, "bgtask: no runtime registered kind gone/v1: the task waited ") {
			t.Fatalf("%+v %v", meta, err)
		}
	}
	// An instance's claim loop may have ended a record beside the passes
	// above: its end is counted once its read-back returns.
	var ended uint64
	waitFor(t, "every end counted", func() bool {
		ended = 0
		for _, m := range fleet {
			ended += m.Stats().Failed
		}
		return ended >= n
	})
	if ended != n {
		t.Fatalf("%d ends landed across the instances, want %d", ended, n)
	}
}

// claimRacer is a pgstore.Store whose first ClaimUnder runs a batch claim
// of the Manager (ClaimWaiting) beside it, and goes on once that batch
// claimed (the race of a spawn's own claim with the instance's claim loop,
// made certain) or waits for the claim to be written (the batch is
// blocked on the Manager's lock).
type claimRacer struct {
	*pgstore.Store
	m       *bgtask.Manager
	once    sync.Once
	armed   atomic.Bool   // batch claims claim nothing until the race
	claimed chan struct{} // closed once the batch's ClaimTasks returned
	batch   chan error    // the batch's ClaimWaiting error
}

func (c *claimRacer) ClaimTasks(ctx context.Context, cl store.Claim) ([]bgtype.TaskMeta, error) {
	if !c.armed.Load() {
		return nil, nil // the claim loop leaves the spawn to claim it first
	}
	got, err := c.Store.ClaimTasks(ctx, cl)
	if len(got) > 0 {
		close(c.claimed)
	}
	return got, err
}

// batchClaim is the racing batch claim. Out of line: its frame names the
// goroutine for gstate.Of.
//
//go:noinline
func (c *claimRacer) batchClaim(ctx context.Context) {
	_, err := c.m.ClaimWaiting(ctx)
	c.batch <- err
}

func (c *claimRacer) ClaimUnder(ctx context.Context, claim bgtype.TaskMeta, limit int) (bool, error) {
	c.once.Do(func() {
		c.armed.Store(true)
		go c.batchClaim(context.WithoutCancel(ctx))
		// This goroutine's frame, not claimMany's: the claim loops of the
		// tests running beside this one are in claimMany too.
		const batchFrame = "github.com/bgtask/bgtask/store/pgstore_test.(*claimRacer).batchClaim"
		for {
			select {
			case <-c.claimed:
				return
			default:
			}
			if strings.HasPrefix(gstate.Of(batchFrame), "sync.") {
				return // waiting for this claim's lock
			}
			runtime.Gosched()
		}
	})
	return c.Store.ClaimUnder(ctx, claim, limit)
}

// TestSpawnQueuedClaimRacesClaimLoop: the claim loop's batch claims a
// spawned task of a capped kind for this instance between the spawn's
// commit and the spawn's own claim: the function runs once, and the task
// ends once, completed.
func TestSpawnQueuedClaimRacesClaimLoop(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	r := newLimitRig(4)
	k := r.kind(t, 2)
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour), pgstore.WithHeartbeatInterval(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // after the Manager's Shutdown
	racer := &claimRacer{Store: s, claimed: make(chan struct{}), batch: make(chan error, 1)}
	m := startManagerWith(t, s, "inst_a", bgtask.WithStore(racer), bgtask.WithKinds(k))
	racer.m = m // before the spawn: only its claim reads it
	id, err := k.Spawn(t.Context(), m.Owner("alice"), stepsSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-racer.batch; err != nil {
		t.Fatalf("ClaimWaiting: %v", err)
	}
	if got := <-r.started; got != id {
		t.Fatalf("started %s, want %s", got, id)
	}
	close(r.gate(id))
	if meta := waitDone(t, m, id); meta.Status != bgtype.StatusCompleted || meta.Attempt != 1 {
		t.Fatalf("%s: %+v", id, meta)
	}
	r.mu.Lock()
	runs := r.runs[id]
	r.mu.Unlock()
	if runs != 1 || len(r.started) != 0 {
		t.Fatalf("ran %d times (%d more starts), want once", runs, len(r.started))
	}
}
