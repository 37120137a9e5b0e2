package pgstore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// TestCancelWaitingOnce: records waiting between two attempts, each
// cancelled by four callers at once (two goroutines on each of two
// instances, each with its own reason): each record ends cancelled once,
// one Cancel returns 1 and the others 0, the record keeps the winner's
// reason, one end lands across the instances, and its owner hears one
// terminal event. Before, each caller's end read back as its own: four
// returned 1 and the owner heard the task up to four times.
func TestCancelWaitingOnce(t *testing.T) {
	t.Parallel()
	const n = 40
	dsn := pgtest.NewDSN(t)
	sa, ma := limitInstance(t, dsn, "inst_a")
	_, mb := limitInstance(t, dsn, "inst_b")
	now := time.Now()
	acts := make([]store.Action, n)
	for i := range acts {
		acts[i] = store.UpsertAction(bgtype.TaskMeta{ID: idgen.NewTask(now), Owner: "alice", Type: bgtype.TypeTask, Status: bgtype.StatusQueued,
			CreatedAt: now, Attempt: 2, Resume: &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: now}})
	}
	if err := sa.Commit(t.Context(), "alice", acts...); err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		id := a.Tasks[0].ID
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for i, m := range []*bgtask.Manager{ma, mb, ma, mb} {
			reason := fmt.Sprintf("canceller %d on %s", i, m.Instance())
			wg.Go(func() {
				k, err := m.Cancel(t.Context(), id, bgtask.WithReason(reason))
				if err != nil || k > 1 {
					t.Errorf("Cancel(%s) by %s = %d, %v", id, m.Instance(), k, err)
				}
				if k == 1 {
					mu.Lock()
					wins = append(wins, reason)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("%s: %d cancels returned 1 (%q), want 1", id, len(wins), wins)
		}
		meta, err := ma.Get(t.Context(), id)
		// ended on the attempt that waited, by the instance whose cancel won
		if err != nil || meta.Status != bgtype.StatusCanceled || meta.CancelReason != wins[0] || meta.Attempt != 2 || !strings.HasSuffix(wins[0], " on "+meta.Instance) {
			t.Fatalf("%s: %+v %v; want cancelled on attempt 2 with reason %q", id, meta, err, wins[0])
		}
	}
	if got := ma.Stats().Canceled + mb.Stats().Canceled; got != n {
		t.Fatalf("%d cancelled ends landed across the instances, want %d", got, n)
	}
	seen := map[string]int{}
	for _, m := range []*bgtask.Manager{ma, mb} {
		run := startRun(t, m, "alice", "run_"+m.Instance(), seen)
		run.step()
		run.step()
		run.end()
	}
	if len(seen) != n {
		t.Fatalf("alice heard %d ends, want %d: %v", len(seen), n, seen)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s heard %d times", id, k)
		}
	}
}
