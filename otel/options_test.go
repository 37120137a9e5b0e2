package bgotel

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Without options, spans and metrics go to the global providers. Not
// parallel: it sets the globals.
func TestDefaultsAreTheGlobals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
		spans := tracetest.NewSpanRecorder()
		reader := sdkmetric.NewManualReader()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
		otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
		t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetMeterProvider(prevMP) })
		tel, err := New()
		if err != nil {
			t.Fatal(err)
		}
		defer tel.Close()

		m, err := bgtask.New(tel.ManagerOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Shutdown(context.Background())
		id, err := tel.Spawn(context.Background(), m.Owner("alice"), func(context.Context, *bgtask.Task) (any, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		b := &bundle{spans: spans, reader: reader}
		if s := b.span(t, id); s.InstrumentationScope().Name != ScopeName {
			t.Fatalf("span scope %q, want %q", s.InstrumentationScope().Name, ScopeName)
		}
		checkPoints(t, MetricStarted, intPoints(t, b.collect(t)[MetricStarted]), []string{"bgtask.task.type=task: 1"})
	})
}

// A nil provider is an error, not a silent default.
func TestNilProviders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithTracerProvider(nil), "bgotel: WithTracerProvider: nil provider"},
		{WithMeterProvider(nil), "bgotel: WithMeterProvider: nil provider"},
	} {
		if _, err := New(tc.opt); err == nil || err.Error() != tc.want {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
}
