package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A stop asked on B of the thread's turn on A, while that turn waits on a
// foreground call: the call returns the cancel, and the thread's next
// turn, on B, hears the task's end once, with the user's reason (decision
// 803). Before, a call that heard the cancel before its turn did took the
// end as its result, marked heard: the next turn heard nothing.
func TestStopDuringForegroundHeardOnAnotherInstance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	_, mb, _ := instanceStore(t, dsn, "inst_b")
	ctx := guard(t)
	pa := openTurn(t, ctx, ma, "run_1")
	started := make(chan string, 1)
	type call struct {
		res bgtask.ForegroundResult
		err error
	}
	done := make(chan call, 1)
	go func() {
		callCtx := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run_1", CallID: "call_1"})
		res, err := ma.Owner("alice").Foreground(callCtx, time.Hour, func(ctx context.Context, tk *bgtask.Task) (any, error) {
			started <- tk.ID()
			<-ctx.Done()
			return nil, ctx.Err()
		})
		done <- call{res, err}
	}()
	id := <-started
	stop, err := mb.Owner("alice").StopRun(ctx, "the user stopped it")
	if err != nil || stop.RunID != "run_1" || stop.Instance != "inst_a" {
		t.Fatalf("StopRun on B = %+v, %v; want run_1 on inst_a", stop, err)
	}
	var c call
	select {
	case c = <-done:
	case <-ctx.Done():
		t.Fatal("the foreground call did not return after the stop")
	}
	if !errors.Is(c.err, bgtask.ErrCanceled) || c.res.TaskID != id {
		t.Fatalf("Foreground = %+v, %v; want task %s's cancel", c.res, c.err, id)
	}
	// The call returns once the end is committed; its event reaches A's
	// inbox just after. The turn ends once it has (as a host's would, at
	// its next boundary): RunEnd then hands it on to the store for the
	// thread's next turn, wherever it lands.
	if err := pa.Receiver().WaitEvent(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pa.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_1", Canceled: true, Aborted: true, Reason: "the user stopped it"}); err != nil {
		t.Fatal(err)
	}
	if err := pa.Close(ctx); err != nil {
		t.Fatal(err)
	}

	pb, err := agent.NewPlugin(mb, "alice", agent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if evs := turnHeard(t, ctx, pb, "run_2"); len(evs) != 1 || evs[0].TaskID != id || evs[0].Kind != bgtype.EventCanceled || evs[0].CancelReason != "the user stopped it" {
		t.Fatalf("the next turn on B heard %+v; want %s cancelled with the user's reason, once", evs, id)
	}
	if evs := turnHeard(t, ctx, pb, "run_3"); len(evs) != 0 {
		t.Fatalf("the turn after heard %+v; want nothing", evs)
	}
}

// turnHeard runs one turn of p's owner, run: RunStart, one Deliver, and a
// RunEnd with the model's answer; it returns the events that step handed
// out, which that RunEnd marks heard.
func turnHeard(t *testing.T, ctx context.Context, p *agent.Plugin, run string) []bgtype.Event {
	t.Helper()
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: run}); err != nil {
		t.Fatal(err)
	}
	msgs, err := p.Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunEnd(ctx, bgtask.RunOutcome{RunID: run}); err != nil {
		t.Fatal(err)
	}
	var evs []bgtype.Event
	for _, m := range msgs {
		if m.Event != nil {
			evs = append(evs, *m.Event)
		}
	}
	return evs
}

// openTurn makes the agent Plugin of alice on m and opens run on it.
func openTurn(t *testing.T, ctx context.Context, m *bgtask.Manager, run string) *agent.Plugin {
	t.Helper()
	p, err := agent.NewPlugin(m, "alice", agent.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: run}); err != nil {
		t.Fatal(err)
	}
	return p
}
