package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// TestCancelWaitingOnce: records waiting between two attempts in one file,
// each cancelled by four callers at once (two goroutines on each of two
// Managers with their own Store on the file, each with its own reason):
// each record ends cancelled once, one Cancel returns 1 and the others 0,
// the record keeps the winner's reason and names its instance, and one
// end lands across the Managers. Before, each caller's end read back as
// its own: up to four returned 1 and the owner heard the task as often.
func TestCancelWaitingOnce(t *testing.T) {
	const n = 40
	path := filepath.Join(t.TempDir(), "tasks.db")
	var (
		ms  []*bgtask.Manager
		sts []store.Store
	)
	for _, inst := range []string{"inst_a", "inst_b"} {
		st := openAt(t, path)
		m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(inst))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Start(t.Context(), m.Runtime()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := m.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
		ms, sts = append(ms, m), append(sts, st)
	}
	ids := make([]string, n)
	for i := range ids {
		r := rec("alice", i, bgtype.StatusQueued)
		r.Instance, r.Attempt, r.Resume = "", 2, &bgtype.Resume{Kind: "gone/v1", Spec: json.RawMessage(`{}`), MaxAttempts: 3, QueuedAt: base}
		commit(t, sts[0], "alice", store.UpsertAction(r))
		ids[i] = r.ID
	}
	for _, id := range ids {
		if meta, err := ms[1].Get(t.Context(), id); err != nil || !store.Waiting(&meta) {
			t.Fatalf("before: %+v %v", meta, err)
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for i, m := range []*bgtask.Manager{ms[0], ms[1], ms[0], ms[1]} {
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
		meta, err := ms[0].Get(t.Context(), id)
		if err != nil || meta.Status != bgtype.StatusCanceled || meta.CancelReason != wins[0] || meta.Attempt != 2 || !strings.HasSuffix(wins[0], " on "+meta.Instance) {
			t.Fatalf("%s: %+v %v; want cancelled on attempt 2 with reason %q", id, meta, err, wins[0])
		}
	}
	if got := ms[0].Stats().Canceled + ms[1].Stats().Canceled; got != n {
		t.Fatalf("%d cancelled ends landed across the Managers, want %d", got, n)
	}
}
