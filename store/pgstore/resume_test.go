package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

type stepsSpec struct {
	Steps int  `json:"steps"`
	Hold  bool `json:"hold,omitempty"` // the first attempt holds after step 1, until its context ends or hold is closed
}

type stepsCursor struct {
	Next int `json:"next"`
}

// stepsRig is a steps/v1 kind that records each step it runs, by task,
// with its attempt and instance.
type stepsRig struct {
	mu      sync.Mutex
	effects map[string][]string // task id -> "step attempt instance"
	held    chan string         // a first attempt reached its hold
	hold    chan struct{}       // closed: held attempts go on
	saves   chan error          // what a held attempt's Save after the hold returned
	kind    *bgtask.Kind[stepsSpec, stepsCursor]
}

func newStepsRig(t *testing.T) *stepsRig {
	r := &stepsRig{effects: map[string][]string{}, held: make(chan string, 100), hold: make(chan struct{}), saves: make(chan error, 100)}
	k, err := bgtask.NewKind("steps/v1", func(ctx context.Context, tk *bgtask.Task, spec stepsSpec, cp *bgtask.Checkpoint[stepsCursor]) (any, error) {
		last, _ := cp.Last()
		for step := max(last.Next, 1); step <= spec.Steps; step++ {
			r.mu.Lock()
			r.effects[tk.ID()] = append(r.effects[tk.ID()], fmt.Sprintf("%d %d %s", step, tk.Attempt(), instanceOf(ctx)))
			r.mu.Unlock()
			if err := cp.Save(ctx, stepsCursor{Next: step + 1}); err != nil {
				return nil, err
			}
			if step == 1 && spec.Hold && tk.Attempt() == 1 {
				r.held <- tk.ID()
				<-r.hold // a paused process: it ignores its context
				r.saves <- cp.Save(context.Background(), stepsCursor{Next: 99})
				return "zombie's result", nil
			}
		}
		return spec.Steps, nil
	}, bgtask.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r.kind = k
	return r
}

type instanceKey struct{}

func instanceOf(ctx context.Context) string {
	s, _ := ctx.Value(instanceKey{}).(string)
	return s
}

// kindInstance is instanceStore with the kind registered.
func kindInstance(t *testing.T, dsn, id string, r *stepsRig) (*pgstore.Store, *bgtask.Manager) {
	t.Helper()
	return limitInstance(t, dsn, id, r.kind)
}

// TestResumeAfterReap: an instance declared dead while its resumable
// tasks run (a paused process: it goes on, a zombie); the reaper requeues
// them, and live instances claim each once and run it from its
// checkpoint. The zombie's later Save fails with ErrSuperseded and changes
// nothing, its result is dropped, and the owner hears one end per task.
func TestResumeAfterReap(t *testing.T) {
	t.Parallel()
	const n = 12
	dsn := pgtest.NewDSN(t)
	r := newStepsRig(t)
	_, ma := kindInstance(t, dsn, "inst_a", r)
	var ids []string
	ctxA := context.WithValue(t.Context(), instanceKey{}, "inst_a")
	for range n {
		id, err := r.kind.Spawn(ctxA, ma.Owner("alice"), stepsSpec{Steps: 3, Hold: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for range n {
		<-r.held
	}
	killInstance(t, dsn, "inst_a")
	sb, mb := kindInstance(t, dsn, "inst_b", r)
	_, mc := kindInstance(t, dsn, "inst_c", r)
	reapN(t, sb, n)
	for _, id := range ids {
		meta, err := mb.Get(t.Context(), id)
		// waiting, or already claimed by B's or C's claim loop (a batch claim is quick)
		waiting := meta.Status == bgtype.StatusQueued && meta.Instance == "" && string(meta.Resume.Checkpoint) == `{"next":2}`
		if err != nil || meta.Attempt != 2 || !waiting && meta.Instance != "inst_b" && meta.Instance != "inst_c" {
			t.Fatalf("after the reap: %+v %v", meta, err)
		}
	}
	// B and C claim at once, each task once.
	var wg sync.WaitGroup
	var started [2]int
	for i, m := range []*bgtask.Manager{mb, mc} {
		wg.Go(func() {
			for {
				k, err := m.ClaimWaiting(context.WithValue(t.Context(), instanceKey{}, m.Instance()))
				if err != nil {
					t.Errorf("ClaimWaiting: %v", err)
				}
				started[i] += k
				if k == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		meta := waitDone(t, mb, id)
		if meta.Status != bgtype.StatusCompleted || meta.Attempt != 2 || string(meta.Result) != "3" {
			t.Fatalf("%s: %+v", id, meta)
		}
	}
	// The zombie wakes: its saves are refused, its results dropped.
	close(r.hold)
	for range n {
		if err := <-r.saves; !errors.Is(err, bgtask.ErrSuperseded) {
			t.Fatalf("zombie's Save = %v, want ErrSuperseded", err)
		}
	}
	byInstance := map[string]int{}
	for _, id := range ids {
		r.mu.Lock()
		got := slices.Clone(r.effects[id])
		r.mu.Unlock()
		// step 1 on attempt 1 (inst_a), steps 2 and 3 once, on attempt 2, by one instance
		if len(got) != 3 || got[0] != "1 1 inst_a" || got[1][:4] != "2 2 " || got[2][:4] != "3 2 " || got[1][4:] != got[2][4:] {
			t.Fatalf("effects of %s: %q", id, got)
		}
		meta := waitDone(t, mb, id)
		if meta.Status != bgtype.StatusCompleted || string(meta.Resume.Checkpoint) != `{"next":4}` || string(meta.Result) != "3" {
			t.Fatalf("%s after the zombie: %+v %+v", id, meta, meta.Resume)
		}
		byInstance[meta.Instance]++
	}
	if byInstance["inst_b"]+byInstance["inst_c"] != n {
		t.Fatalf("claimed by %v, want %d by inst_b and inst_c", byInstance, n)
	}
	t.Logf("claims: %v (explicit ClaimWaiting started %v; the rest their loops)", byInstance, started)
	// alice hears each end once (no interrupted: they were resumed).
	seen := map[string]int{}
	run := startRun(t, mb, "alice", "run_alice", seen)
	run.step()
	run.step()
	run.end()
	if len(seen) != n {
		t.Fatalf("alice heard %d ends, want %d: %v", len(seen), n, seen)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s heard %d times", id, k)
		}
	}
}

// waitDone waits for a record to be terminal through m's store.
func waitDone(t *testing.T, m *bgtask.Manager, id string) bgtype.TaskMeta {
	t.Helper()
	var meta bgtype.TaskMeta
	waitFor(t, id+" terminal", func() bool {
		var err error
		meta, err = m.Get(t.Context(), id)
		return err == nil && meta.Status.IsTerminal()
	})
	return meta
}
