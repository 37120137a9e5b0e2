package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A foreground call's result is heard when the model's answer to it is
// kept, as an event is (decision 804): the thread's turn on A gets the
// result of a call, then its model never answers (the host drops the
// turn's conversation, or A is killed mid-turn); the thread's next turn,
// on B, hears the task's end once, as an event, and the turn after it
// nothing. Before, the record was marked heard when the call returned,
// and B heard nothing: the result was lost with A's turn.
func TestForegroundAnswerOfALostTurnHeardOnAnotherInstance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, ctx context.Context, pa *agent.Plugin, dsn string)
	}{
		{"the host drops the turn", func(t *testing.T, ctx context.Context, pa *agent.Plugin, _ string) {
			if n, err := pa.Receiver().Undeliver(); n != 1 || err != nil {
				t.Fatalf("Undeliver = %d, %v; want the call's result given back", n, err)
			}
			if err := pa.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_1", Aborted: true}); err != nil {
				t.Fatal(err)
			}
			if err := pa.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"A is killed mid-turn", func(t *testing.T, _ context.Context, _ *agent.Plugin, dsn string) {
			sqlExec(t, dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_a'`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.NewDSN(t)
			_, ma, _ := instanceStore(t, dsn, "inst_a")
			_, mb, _ := instanceStore(t, dsn, "inst_b")
			ctx := guard(t)
			pa := openTurn(t, ctx, ma, "run_1")
			callCtx := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run_1", CallID: "call_1"})
			res, err := ma.Owner("alice").Foreground(callCtx, time.Hour, func(context.Context, *bgtask.Task) (any, error) {
				return "the answer", nil
			})
			if err != nil || res.Status != bgtype.StatusCompleted || string(res.Result) != `"the answer"` {
				t.Fatalf("Foreground = %+v, %v; want its result", res, err)
			}
			if meta, err := mb.Owner("alice").Get(ctx, res.TaskID); err != nil || meta.Announced {
				t.Fatalf("record seen on B: announced %v, %v; want not yet (the model has not answered)", meta.Announced, err)
			}
			tc.lose(t, ctx, pa, dsn)

			pb, err := agent.NewPlugin(mb, "alice", agent.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if evs := turnHeard(t, ctx, pb, "run_2"); len(evs) != 1 || evs[0].TaskID != res.TaskID || evs[0].Kind != bgtype.EventCompleted || string(evs[0].Result) != `"the answer"` {
				t.Fatalf("the next turn on B heard %+v; want %s completed with its result, once", evs, res.TaskID)
			}
			if evs := turnHeard(t, ctx, pb, "run_3"); len(evs) != 0 {
				t.Fatalf("the turn after heard %+v; want nothing", evs)
			}
			if meta, err := mb.Owner("alice").Get(ctx, res.TaskID); err != nil || !meta.Announced {
				t.Fatalf("record after B's turns: announced %v, %v; want marked", meta.Announced, err)
			}
		})
	}
}

// A wait's answer of a task that ran on another instance, given back by a
// host that dropped the turn, comes to the thread's next turn on the same
// instance once: as the given-back event, not again from its record, which
// the next turn's Restore reads once that instance is gone (decision 804).
func TestWaitAnswerOfAnotherInstancesTaskGivenBackOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	_, mb, _ := instanceStore(t, dsn, "inst_b")
	ctx := guard(t)
	id, err := mb.Owner("alice").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "from B", nil })
	if err != nil {
		t.Fatal(err)
	}
	pa := openTurn(t, ctx, ma, "run_1")
	meta, err := ma.Owner("alice").Wait(ctx, id)
	if err != nil || meta.Status != bgtype.StatusCompleted {
		t.Fatalf("Wait on A = %s, %v; want completed", meta.Status, err)
	}
	ma.Owner("alice").MarkAnswered(ctx, &meta)
	if n, err := pa.Receiver().Undeliver(); n != 1 || err != nil {
		t.Fatalf("Undeliver = %d, %v; want the answer given back", n, err)
	}
	if err := pa.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_1", Aborted: true}); err != nil {
		t.Fatal(err)
	}
	// B is gone: the next turn's Restore announces the unannounced ends B
	// ran, this one among them unless A knows it handed it out.
	sqlExec(t, dsn, `UPDATE bgtask_instances SET state = 'dead' WHERE id = 'inst_b'`)
	if err := pa.RunStart(ctx, bgtask.RunInfo{RunID: "run_2"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := pa.Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		if m.Event != nil {
			got = append(got, m.Event.TaskID+" "+string(m.Event.Kind))
		}
	}
	if len(got) != 1 || got[0] != id+" completed" {
		t.Fatalf("the next turn heard %q; want %s completed, once", got, id)
	}
}
