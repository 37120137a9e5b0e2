package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Stats counts every outcome, commit failures included (DESIGN: the failure
// reaches the owner as an event and a metric), and the current load.
func TestStatsCountsOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFailingStore()
		m, err := New(WithStore(store), WithTuning(Tuning{CommitAttempts: 1, CommitBackoff: time.Millisecond}), WithLimits(Limits{MaxConcurrent: 2, QueueWhenFull: true}))
		if err != nil {
			t.Fatal(err)
		}
		o := m.Owner("a")
		release := make(chan struct{})
		park := func(ctx context.Context, _ *Task) (any, error) { <-release; return "ok", nil }
		fns := []Func{
			park,
			park,
			park, // queued
			func(ctx context.Context, _ *Task) (any, error) { return nil, errors.New("boom") },
		}
		var ids []string
		for _, fn := range fns {
			id, err := o.Spawn(t.Context(), fn)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		synctest.Wait()
		if got, want := m.Stats(), (Stats{Live: 4, Queued: 2, Running: 2, Spawned: 4}); got != want {
			t.Fatalf("while parked: %+v, want %+v", got, want)
		}
		store.fail(1, bgtype.StatusCanceled) // the cancelled record is lost
		if n, err := m.Cancel(t.Context(), ids[2]); n != 1 || err != nil {
			t.Fatalf("Cancel = %d, %v", n, err)
		}
		synctest.Wait()
		close(release)
		if _, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { panic("p") }); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := m.Wait(t.Context(), id); err != nil && !errors.Is(err, ErrNotLive) && !isTaskError(err) {
				t.Fatal(err)
			}
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := Stats{Spawned: 5, Completed: 2, Failed: 2, Canceled: 1, Panicked: 1, CommitFailures: 1}
		if got := m.Stats(); got != want {
			t.Fatalf("after Shutdown: %+v, want %+v", got, want)
		}
	})
}
