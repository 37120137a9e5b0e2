package bgotel

import (
	"context"
	"errors"
	"sync"

	"github.com/bgtask/bgtask/bgtype"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/bgtask/bgtask"
)

// Metric names.
const (
	MetricStarted    = "bgtask.tasks.started"  // counter: spawns, by type
	MetricFinished   = "bgtask.tasks.finished" // counter: ends, by type, status and error.type
	MetricDuration   = "bgtask.task.duration"  // histogram: spawn to end, in seconds, like finished
	MetricRunning    = "bgtask.tasks.running"  // from Manager.Stats
	MetricQueued     = "bgtask.tasks.queued"   // from Manager.Stats
	MetricInboxDepth = "bgtask.inbox.depth"    // events queued in an observed inbox, by bgtask.inbox.name
)

// durationBuckets are the histogram's bounds in seconds: a tool call's
// second to a research task's hours.
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200}

type instruments struct {
	started, finished           metric.Int64Counter
	duration                    metric.Float64Histogram
	running, queued, inboxDepth metric.Int64ObservableUpDownCounter

	// The attribute sets of the counts, made once per type, status and
	// kind: there are few, and a set costs allocations to build.
	startAttrs sync.Map // task type -> metric.MeasurementOption
	endAttrs   sync.Map // endKey -> metric.MeasurementOption
}

type endKey struct{ typ, status, kind string }

// make creates the instruments on meter.
func (in *instruments) make(meter metric.Meter) error {
	var errs [6]error
	in.started, errs[0] = meter.Int64Counter(MetricStarted, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks spawned."))
	in.finished, errs[1] = meter.Int64Counter(MetricFinished, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks that reached a terminal status."))
	in.duration, errs[2] = meter.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from a task's spawn to its terminal status."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.running, errs[3] = meter.Int64ObservableUpDownCounter(MetricRunning, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks holding a concurrency slot."))
	in.queued, errs[4] = meter.Int64ObservableUpDownCounter(MetricQueued, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks waiting for a concurrency slot."))
	in.inboxDepth, errs[5] = meter.Int64ObservableUpDownCounter(MetricInboxDepth, metric.WithUnit("{event}"),
		metric.WithDescription("Events queued in an agent's inbox, not yet drained."))
	return errors.Join(errs[:]...)
}

// start counts a task's spawn.
func (in *instruments) start(meta bgtype.TaskMeta) {
	attrs, ok := in.startAttrs.Load(meta.Type)
	if !ok {
		attrs, _ = in.startAttrs.LoadOrStore(meta.Type, metric.WithAttributeSet(attribute.NewSet(KeyTaskType.String(meta.Type))))
	}
	in.started.Add(context.Background(), 1, attrs.(metric.MeasurementOption))
}

// finish counts a task's end and records its duration.
func (in *instruments) finish(meta bgtype.TaskMeta) {
	k := endKey{meta.Type, string(meta.Status), errorKind(meta)}
	v, ok := in.endAttrs.Load(k)
	if !ok {
		v, _ = in.endAttrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(endAttrs(meta, true)...)))
	}
	attrs := v.(metric.MeasurementOption)
	in.finished.Add(context.Background(), 1, attrs)
	if !meta.CreatedAt.IsZero() && !meta.FinishedAt.IsZero() {
		in.duration.Record(context.Background(), meta.FinishedAt.Sub(meta.CreatedAt).Seconds(), attrs)
	}
}

type inboxEntry struct {
	name string
	refs int
}

// ObserveManager reports m's running and queued tasks (Manager.Stats) until
// the returned function is called or tel is closed. With several Managers
// the values are summed. The returned function is safe to call more than
// once.
func (tel *Telemetry) ObserveManager(m *bgtask.Manager) (forget func()) {
	tel.mu.Lock()
	tel.managers[m]++
	tel.mu.Unlock()
	return tel.forgetter(func() {
		if tel.managers[m]--; tel.managers[m] == 0 {
			delete(tel.managers, m)
		}
	})
}

// ObserveInbox reports ib's depth (InboxStats.Len) under the attribute
// bgtask.inbox.name = name until the returned function is called or tel is
// closed. Inboxes observed under one name are summed: the name should
// say what kind of agent reads it, not be an owner id, which would make a
// series per owner. The returned function is safe to call more than once.
func (tel *Telemetry) ObserveInbox(name string, ib *bgtask.Inbox) (forget func()) {
	tel.mu.Lock()
	e := tel.inboxes[ib]
	e.name = name
	e.refs++
	tel.inboxes[ib] = e
	tel.mu.Unlock()
	return tel.forgetter(func() {
		e := tel.inboxes[ib]
		if e.refs--; e.refs == 0 {
			delete(tel.inboxes, ib)
		} else {
			tel.inboxes[ib] = e
		}
	})
}

// forgetter returns a function that runs undo once, under tel.mu.
func (tel *Telemetry) forgetter(undo func()) func() {
	done := false
	return func() {
		tel.mu.Lock()
		defer tel.mu.Unlock()
		if !done {
			done = true
			undo()
		}
	}
}

// observeGauges is the gauges' callback.
func (tel *Telemetry) observeGauges(_ context.Context, o metric.Observer) error {
	tel.mu.Lock()
	managers := make([]*bgtask.Manager, 0, len(tel.managers))
	for m := range tel.managers {
		managers = append(managers, m)
	}
	type named struct {
		name string
		ib   *bgtask.Inbox
	}
	inboxes := make([]named, 0, len(tel.inboxes))
	for ib, e := range tel.inboxes {
		inboxes = append(inboxes, named{e.name, ib})
	}
	tel.mu.Unlock()
	depth := make(map[string]int64, len(inboxes))
	for _, n := range inboxes {
		depth[n.name] += int64(n.ib.Len())
	}
	var running, queued int64
	for _, m := range managers {
		s := m.Stats()
		running += int64(s.Running)
		queued += int64(s.Queued)
	}
	o.ObserveInt64(tel.inst.running, running)
	o.ObserveInt64(tel.inst.queued, queued)
	for name, n := range depth {
		o.ObserveInt64(tel.inst.inboxDepth, n, metric.WithAttributes(KeyInboxName.String(name)))
	}
	return nil
}
