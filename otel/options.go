package bgotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures New. Options are applied in order; New returns the
// first option's error.
type Option func(*config) error

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// WithTracerProvider sets where spans go. Default: the global provider
// (otel.GetTracerProvider) when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("bgotel: WithTracerProvider: nil provider")
		}
		c.tracerProvider = tp
		return nil
	}
}

// WithMeterProvider sets where metrics go. Default: the global provider
// (otel.GetMeterProvider) when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("bgotel: WithMeterProvider: nil provider")
		}
		c.meterProvider = mp
		return nil
	}
}
