package bgotel

import (
	"context"
	"errors"
	"fmt"
	"github.com/bgtask/bgtask/internal/memstore"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/bgtask/bgtask"
)

// histPoints renders a histogram's points as sorted "attrs: count=N sum=S".
func histPoints(t *testing.T, data metricdata.Aggregation) []string {
	t.Helper()
	h, ok := data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("metric data %T, want Histogram[float64]", data)
	}
	var out []string
	for _, p := range h.DataPoints {
		out = append(out, fmt.Sprintf("%s: count=%d sum=%g", strings.Join(attrs(p.Attributes.ToSlice()), " "), p.Count, p.Sum))
	}
	slices.Sort(out)
	return out
}

func checkPoints(t *testing.T, name string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s\n%q\nwant\n%q", name, got, want)
	}
}

// After a known set of tasks, every metric has exact values: counts by
// type, status and error kind, durations from spawn to end in fake time,
// and the running, queued and inbox gauges at two moments.
func TestMetricsExact(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t, bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1, QueueWhenFull: true}))
		b.tel.ObserveManager(b.m)
		alice, err := b.m.Inbox("alice")
		if err != nil {
			t.Fatal(err)
		}
		bob, err := b.m.Inbox("bob")
		if err != nil {
			t.Fatal(err)
		}
		b.tel.ObserveInbox("agent", alice)
		forgetBob := b.tel.ObserveInbox("agent", bob)
		ctx := context.Background()
		release := make(chan struct{})
		fetch := bgtask.WithType("fetch")
		blocker := b.spawn(t, ctx, "alice", func(context.Context, *bgtask.Task) (any, error) { <-release; return "ok", nil }, fetch)
		failing := b.spawn(t, ctx, "alice", func(context.Context, *bgtask.Task) (any, error) {
			<-time.After(time.Second)
			return nil, errors.New("no")
		})
		panicking := b.spawn(t, ctx, "alice", func(context.Context, *bgtask.Task) (any, error) { panic("kaput") })
		canceled := b.spawn(t, ctx, "bob", func(context.Context, *bgtask.Task) (any, error) { return nil, nil }, fetch)
		synctest.Wait()

		got := b.collect(t)
		checkPoints(t, MetricRunning, intPoints(t, got[MetricRunning]), []string{": 1"})
		checkPoints(t, MetricQueued, intPoints(t, got[MetricQueued]), []string{": 3"})
		checkPoints(t, MetricInboxDepth, intPoints(t, got[MetricInboxDepth]), []string{"bgtask.inbox.name=agent: 0"})

		if n, err := b.m.Owner("bob").Cancel(ctx, canceled); n != 1 || err != nil {
			t.Fatalf("Cancel: (%d, %v)", n, err)
		}
		<-time.After(2 * time.Second)
		close(release)
		for _, id := range []string{blocker, failing, panicking, canceled} {
			b.wait(t, id)
		}

		got = b.collect(t)
		checkPoints(t, MetricStarted, intPoints(t, got[MetricStarted]), []string{
			"bgtask.task.type=fetch: 2", "bgtask.task.type=task: 2"})
		checkPoints(t, MetricFinished, intPoints(t, got[MetricFinished]), []string{
			"bgtask.task.status=cancelled bgtask.task.type=fetch error.type=cancelled: 1",
			"bgtask.task.status=completed bgtask.task.type=fetch: 1",
			"bgtask.task.status=failed bgtask.task.type=task error.type=error: 1",
			"bgtask.task.status=failed bgtask.task.type=task error.type=panic: 1",
		})
		checkPoints(t, MetricDuration, histPoints(t, got[MetricDuration]), []string{
			"bgtask.task.status=cancelled bgtask.task.type=fetch error.type=cancelled: count=1 sum=0",
			"bgtask.task.status=completed bgtask.task.type=fetch: count=1 sum=2",
			"bgtask.task.status=failed bgtask.task.type=task error.type=error: count=1 sum=3",
			"bgtask.task.status=failed bgtask.task.type=task error.type=panic: count=1 sum=3",
		})
		checkPoints(t, MetricRunning, intPoints(t, got[MetricRunning]), []string{": 0"})
		checkPoints(t, MetricQueued, intPoints(t, got[MetricQueued]), []string{": 0"})
		// Three terminal events wait in alice's inbox, one in bob's.
		checkPoints(t, MetricInboxDepth, intPoints(t, got[MetricInboxDepth]), []string{"bgtask.inbox.name=agent: 4"})

		forgetBob()
		forgetBob() // a second call does nothing
		got = b.collect(t)
		checkPoints(t, MetricInboxDepth, intPoints(t, got[MetricInboxDepth]), []string{"bgtask.inbox.name=agent: 3"})
	})
}

// The instruments have the names, kinds and units the package documents.
func TestMetricsUnits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		b.tel.ObserveManager(b.m)
		ib, err := b.m.Inbox("alice")
		if err != nil {
			t.Fatal(err)
		}
		b.tel.ObserveInbox("agent", ib)
		b.wait(t, b.spawn(t, context.Background(), "alice", func(context.Context, *bgtask.Task) (any, error) { return nil, nil }))
		var rm metricdata.ResourceMetrics
		if err := b.reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name != ScopeName {
				t.Fatalf("scope %q, want %q", sm.Scope.Name, ScopeName)
			}
			for _, m := range sm.Metrics {
				kind := fmt.Sprintf("%T", m.Data)
				if s, ok := m.Data.(metricdata.Sum[int64]); ok {
					kind = fmt.Sprintf("sum monotonic=%v", s.IsMonotonic)
				}
				got = append(got, fmt.Sprintf("%s %s %s", m.Name, m.Unit, kind))
			}
		}
		slices.Sort(got)
		want := []string{
			"bgtask.inbox.depth {event} sum monotonic=false",
			"bgtask.task.duration s metricdata.Histogram[float64]",
			"bgtask.tasks.finished {task} sum monotonic=true",
			"bgtask.tasks.queued {task} sum monotonic=false",
			"bgtask.tasks.running {task} sum monotonic=false",
			"bgtask.tasks.started {task} sum monotonic=true",
		}
		checkPoints(t, "instruments", got, want)
	})
}

// After Close the gauges report nothing; counts go on.
func TestCloseStopsGauges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBundle(t)
		b.tel.ObserveManager(b.m)
		if err := b.tel.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.tel.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		b.wait(t, b.spawn(t, context.Background(), "alice", func(context.Context, *bgtask.Task) (any, error) { return nil, nil }))
		got := b.collect(t)
		if _, ok := got[MetricRunning]; ok {
			t.Fatalf("%s reported after Close", MetricRunning)
		}
		checkPoints(t, MetricStarted, intPoints(t, got[MetricStarted]), []string{"bgtask.task.type=task: 1"})
	})
}

// A record that a gone process ran, interrupted by Restore, counts as
// finished with its kind; it was not started here and has no span.
func TestMetricsInterrupted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		stale := bgtype.TaskMeta{ID: "task_0123456789abcdef0123456789abcdef", Owner: "alice", Type: "fetch",
			Status: bgtype.StatusRunning, CreatedAt: time.Now().UTC(), StartedAt: time.Now().UTC(), Instance: "gone"}
		if err := st.Commit(ctx, "alice", store.UpsertAction(stale)); err != nil {
			t.Fatal(err)
		}
		b := newBundle(t, bgtask.WithStore(st))
		<-time.After(5 * time.Second)
		if got, err := b.m.Restore(ctx, "alice"); len(got) != 1 || err != nil {
			t.Fatalf("Restore: %d records, %v; want 1", len(got), err)
		}
		got := b.collect(t)
		checkPoints(t, MetricFinished, intPoints(t, got[MetricFinished]), []string{
			"bgtask.task.status=interrupted bgtask.task.type=fetch error.type=interrupted: 1"})
		checkPoints(t, MetricDuration, histPoints(t, got[MetricDuration]), []string{
			"bgtask.task.status=interrupted bgtask.task.type=fetch error.type=interrupted: count=1 sum=5"})
		if _, ok := got[MetricStarted]; ok {
			t.Fatalf("%s reported for a task started elsewhere", MetricStarted)
		}
		if n := len(b.spans.Ended()); n != 0 {
			t.Fatalf("%d spans, want none", n)
		}
	})
}
