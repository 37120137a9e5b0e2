// Package bgotel reports bgtask tasks to OpenTelemetry: a span per task,
// from its spawn to its terminal status, and metrics of the Manager.
//
// Install it in three steps: New makes the instruments, its ManagerOptions
// go to bgtask.New, and ObserveManager (and ObserveInbox for the inboxes
// the host reads) feed the gauges. Tasks started through Telemetry.Spawn or
// Telemetry.SpawnAgent get a span, a child of the span on the spawner's
// context, and their function's context carries that span, so work the
// task traces nests under it. Tasks spawned directly on a bgtask.Owner are
// counted in the metrics but get no span.
//
// The package is named bgotel so that it does not clash with
// go.opentelemetry.io/otel.
package bgotel
