package bgotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
	bgotel "github.com/bgtask/bgtask/otel"
)

// The README's "OpenTelemetry": the Manager's options and metrics, an
// inbox's depth, and a task spawned with its span, on the global
// providers.
func Example_readme() {
	ctx := context.Background()
	fn := func(ctx context.Context, t *bgtask.Task) (any, error) { return "the report", nil }

	tel, err := bgotel.New()                      // the global providers; or WithTracerProvider, WithMeterProvider
	m, err := bgtask.New(tel.ManagerOptions()...) // plus your own options
	tel.ObserveManager(m)                         // bgtask.tasks.running, bgtask.tasks.queued
	inbox, err := m.Inbox("agent-1")
	tel.ObserveInbox("assistant", inbox)                                         // bgtask.inbox.depth{bgtask.inbox.name="assistant"}
	id, err := tel.Spawn(ctx, m.Owner("agent-1"), fn, bgtask.WithName("report")) // in a tool call: the task's span is the call's child

	if err != nil {
		log.Fatal(err)
	}
	defer tel.Close()
	defer m.Shutdown(ctx)
	rec, err := m.Owner("agent-1").Wait(ctx, id)
	fmt.Println(rec.Status, string(rec.Result), err)
	// Output: completed "the report" <nil>
}
