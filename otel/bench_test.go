package bgotel

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkSpawnWait measures a spawn and the wait for its end: plain, with
// the Manager reporting metrics only, and traced through Telemetry.Spawn
// (SDK providers, no exporter).
func BenchmarkSpawnWait(b *testing.B) {
	fn := func(context.Context, *bgtask.Task) (any, error) { return nil, nil }
	for _, mode := range []string{"plain", "metrics", "traced"} {
		b.Run(mode, func(b *testing.B) {
			var opts []bgtask.Option
			tel, err := New(WithTracerProvider(sdktrace.NewTracerProvider()),
				WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Close()
			if mode != "plain" {
				opts = tel.ManagerOptions()
			}
			m, err := bgtask.New(opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Shutdown(context.Background())
			o := m.Owner("alice")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var id string
				if mode == "traced" {
					id, err = tel.Spawn(ctx, o, fn)
				} else {
					id, err = o.Spawn(ctx, fn)
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := o.Wait(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
