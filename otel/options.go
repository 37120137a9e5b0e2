package bgotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures New. Options are applied in order; New reports the
// first invalid one.
type Option func(*config)

type config struct {
	err            error // the first invalid option's, reported by New
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// WithTracerProvider sets where spans go. Default: the global provider
// (otel.GetTracerProvider) when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp == nil {
			c.fail(errors.New("bgotel: WithTracerProvider: nil provider"))
			return
		}
		c.tracerProvider = tp
	}
}

// WithMeterProvider sets where metrics go. Default: the global provider
// (otel.GetMeterProvider) when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.fail(errors.New("bgotel: WithMeterProvider: nil provider"))
			return
		}
		c.meterProvider = mp
	}
}

// fail records the error of an invalid option; New reports the first.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
