package bgotel

import (
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/bgtask/bgtask"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/bgtask/bgtask/otel"

// Telemetry reports tasks to OpenTelemetry. Make one with New; the zero
// value is not usable. It is safe for concurrent use, and one Telemetry may
// serve several Managers. Close stops the gauges.
type Telemetry struct {
	tracer trace.Tracer
	inst   instruments
	reg    metric.Registration

	mu       sync.Mutex
	tasks    map[string]*taskState // every live task the observer has seen
	managers map[*bgtask.Manager]int
	inboxes  map[*bgtask.Inbox]inboxEntry
	closed   bool
}

// New returns a Telemetry with its instruments made, or the first option's
// error, or the meter's error.
func New(opts ...Option) (*Telemetry, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	tel := &Telemetry{
		tracer:   c.tracerProvider.Tracer(ScopeName),
		tasks:    make(map[string]*taskState),
		managers: make(map[*bgtask.Manager]int),
		inboxes:  make(map[*bgtask.Inbox]inboxEntry),
	}
	meter := c.meterProvider.Meter(ScopeName)
	if err := tel.inst.make(meter); err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(tel.observeGauges, tel.inst.running, tel.inst.queued, tel.inst.inboxDepth)
	if err != nil {
		return nil, err
	}
	tel.reg = reg
	return tel, nil
}

// ManagerOptions returns the options that make a Manager report to tel:
// pass them to bgtask.New. They set the Manager's observers (WithObserver
// and WithEventObserver); a host that has its own observer calls Observe
// and ObserveEvent from it instead.
func (tel *Telemetry) ManagerOptions() []bgtask.Option {
	return []bgtask.Option{bgtask.WithObserver(tel.Observe), bgtask.WithEventObserver(tel.ObserveEvent)}
}

// Observe records a committed transition: a started task, its span's
// events, its end. It is the Manager's observer (see ManagerOptions); it
// never waits for a task. Ending a span runs the tracer provider's span
// processors in the goroutine of the transition (the task's, mostly): give
// the provider a batching processor (sdktrace.WithBatcher), as usual.
func (tel *Telemetry) Observe(tr bgtask.Transition) {
	meta := tr.Task
	switch {
	case tr.From == "":
		tel.inst.start(meta)
		tel.mu.Lock()
		tel.tasks[meta.ID] = &taskState{meta: meta}
		tel.mu.Unlock()
	case tr.To.IsTerminal():
		tel.inst.finish(meta)
		if st := tel.forget(meta.ID); st != nil {
			st.end(meta, "")
		}
	default:
		if st := tel.task(meta.ID); st != nil {
			st.transition(tr)
		}
	}
}

// ObserveEvent records a custom event of a task as an event of its span,
// and the end of a task whose terminal record could not be committed
// (EventCommitFailed) like any end, with the commit's error as the span's
// status. It is the Manager's event observer (see ManagerOptions).
func (tel *Telemetry) ObserveEvent(ev bgtype.Event) {
	switch ev.Kind {
	case bgtype.EventCustom:
		if st := tel.task(ev.TaskID); st != nil {
			st.custom(ev)
		}
	case bgtype.EventCommitFailed:
		st := tel.forget(ev.TaskID)
		if st == nil {
			return
		}
		meta := st.meta // the first record, with the end that was not committed
		meta.Status, meta.FinishedAt = ev.Status, time.Now()
		tel.inst.finish(meta)
		st.end(meta, "bgtask: terminal record not committed: "+ev.Error)
	}
}

// task returns the state of a live task, or nil.
func (tel *Telemetry) task(id string) *taskState {
	tel.mu.Lock()
	defer tel.mu.Unlock()
	return tel.tasks[id]
}

// forget removes and returns the state of a task that ended, or nil.
func (tel *Telemetry) forget(id string) *taskState {
	tel.mu.Lock()
	defer tel.mu.Unlock()
	st := tel.tasks[id]
	delete(tel.tasks, id)
	return st
}

// Close unregisters the gauges' callback: running, queued and inbox depth
// are no longer reported. Spans and counts go on. It returns the meter's
// error; calling it again does nothing.
func (tel *Telemetry) Close() error {
	tel.mu.Lock()
	if tel.closed {
		tel.mu.Unlock()
		return nil
	}
	tel.closed = true
	tel.mu.Unlock()
	return tel.reg.Unregister()
}
