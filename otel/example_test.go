package bgotel_test

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask"
	bgotel "github.com/bgtask/bgtask/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Set up tracing and metrics for a Manager, and start a task from a tool
// call: its span is a child of the call's span.
func Example() {
	// A program passes its own providers, or none to use the globals.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	tel, err := bgotel.New(bgotel.WithTracerProvider(tp), bgotel.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer tel.Close()
	m, err := bgtask.New(tel.ManagerOptions()...)
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(context.Background())
	tel.ObserveManager(m) // running and queued
	inbox, err := m.Inbox("agent-1")
	if err != nil {
		panic(err)
	}
	tel.ObserveInbox("assistant", inbox) // inbox depth

	// Inside a tool call: spawn through tel instead of the Owner.
	ctx, call := tp.Tracer("agent").Start(context.Background(), "tool fetch_report")
	id, err := tel.Spawn(ctx, m.Owner("agent-1"), func(ctx context.Context, t *bgtask.Task) (any, error) {
		_ = t.Emit("progress", map[string]int{"percent": 50})
		return "the report", nil
	}, bgtask.WithName("report"))
	call.End()
	if err != nil {
		panic(err)
	}
	if _, err := m.Owner("agent-1").Wait(context.Background(), id); err != nil {
		panic(err)
	}

	for _, s := range spans.Ended() {
		if s.Name() != "bgtask task" {
			continue
		}
		fmt.Println(s.Name(), "child of the call:", s.Parent().SpanID() == call.SpanContext().SpanID())
		for _, kv := range s.Attributes() {
			if kv.Key == bgotel.KeyTaskName || kv.Key == bgotel.KeyTaskStatus {
				fmt.Printf("  %s = %s\n", kv.Key, kv.Value.Emit())
			}
		}
		for _, e := range s.Events() {
			fmt.Println("  event", e.Name)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if sum, ok := mt.Data.(metricdata.Sum[int64]); ok && mt.Name == bgotel.MetricFinished {
				fmt.Println(mt.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// bgtask task child of the call: true
	//   bgtask.task.name = report
	//   bgtask.task.status = completed
	//   event bgtask.task.progress
	// bgtask.tasks.finished 1
}
