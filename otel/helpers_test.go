package bgotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bgtask/bgtask"
)

// bundle is one test's telemetry pipeline and Manager.
type bundle struct {
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *Telemetry
	m      *bgtask.Manager
}

// newBundle makes a Telemetry on in-memory SDK providers and a Manager that
// reports to it, shut down at the end of the test.
func newBundle(t *testing.T, opts ...bgtask.Option) *bundle {
	t.Helper()
	b := &bundle{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	b.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	tel, err := New(WithTracerProvider(b.tp), WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	b.tel = tel
	m, err := bgtask.New(append(tel.ManagerOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	b.m = m
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := tel.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// spawn starts fn for owner through the Telemetry or fails the test.
func (b *bundle) spawn(t *testing.T, ctx context.Context, owner string, fn bgtask.Func, opts ...bgtask.SpawnOption) string {
	t.Helper()
	id, err := b.tel.Spawn(ctx, b.m.Owner(owner), fn, opts...)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	return id
}

// wait waits for id's terminal record or fails the test.
func (b *bundle) wait(t *testing.T, id string) bgtype.TaskMeta {
	t.Helper()
	meta, err := b.m.Wait(context.Background(), id)
	if _, failed := errors.AsType[*bgtask.TaskError](err); failed && meta.Status == bgtype.StatusFailed {
		err = nil // a failed task's Wait says how it failed
	}
	if err != nil {
		t.Fatalf("Wait %s: %v", id, err)
	}
	return meta
}

// span returns the one ended span with attribute bgtask.task.id = id.
func (b *bundle) span(t *testing.T, id string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if attrOf(s.Attributes(), KeyTaskID) == id {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d ended spans for task %s, want 1", len(found), id)
	}
	return found[0]
}

func attrOf(kvs []attribute.KeyValue, k attribute.Key) string {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// attrs renders attributes as sorted "key=value" strings.
func attrs(kvs []attribute.KeyValue) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
	}
	slices.Sort(out)
	return out
}

// events renders a span's events as "name key=value ...".
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, strings.Join(append([]string{e.Name}, attrs(e.Attributes)...), " "))
	}
	return out
}

// collect reads every metric, by name.
func (b *bundle) collect(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// points renders the int sums of a metric as sorted "attrs: value" lines.
func intPoints(t *testing.T, data metricdata.Aggregation) []string {
	t.Helper()
	sum, ok := data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric data %T, want Sum[int64]", data)
	}
	var out []string
	for _, p := range sum.DataPoints {
		out = append(out, fmt.Sprintf("%s: %d", strings.Join(attrs(p.Attributes.ToSlice()), " "), p.Value))
	}
	slices.Sort(out)
	return out
}

// parentOf returns a span's parent span id.
func parentOf(s sdktrace.ReadOnlySpan) trace.SpanID { return s.Parent().SpanID() }
