package bgmcp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// pgManager returns a Manager on pgstore, registered as instance name.
func pgManager(t *testing.T, dsn, name string) *bgtask.Manager {
	t.Helper()
	st, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the Manager's Shutdown
	m := newManager(t, bgtask.WithStore(st), bgtask.WithInstance(name))
	if err := st.Start(t.Context(), m.Runtime()); err != nil {
		t.Fatal(err)
	}
	return m
}

// Two instances on one PostgreSQL database: a task runs on A, the server
// on B cancels it, and the task's goroutine on A stops.
func TestCrossInstanceCancelPostgres(t *testing.T) {
	dsn := pgtest.StartDSN(t)
	tools := newTestTools()
	a := dialRaw(t, newServer(t, pgManager(t, dsn, "instance-a"), tools, bgmcp.WithOwnerFunc(alice)))
	b := dialRaw(t, newServer(t, pgManager(t, dsn, "instance-b"), tools, bgmcp.WithOwnerFunc(alice)))

	tk := a.callTask("slow", map[string]any{"text": "far"}, nil)
	<-tools.started
	if got := b.getTask(tk.TaskID); got.Status != "working" {
		t.Fatalf("B sees %+v, want working", got)
	}
	var got task
	decode(t, b.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}), &got)
	if got.Status != "cancelled" || got.StatusMessage != "bgtask: task cancelled" {
		t.Errorf("B's cancel answered %+v, want cancelled", got)
	}
	if err := <-tools.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the task's ctx on A ended with %v, want context.Canceled", err)
	}
	if got := a.getTask(tk.TaskID); got.Status != "cancelled" {
		t.Errorf("A sees %+v", got)
	}
}
