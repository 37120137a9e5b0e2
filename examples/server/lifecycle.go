package main

// This file holds every call the server makes to the Plugin's lifecycle
// (making one per thread, opening and ending a run, forgetting a thread),
// so that the changes of that API touch this file only.

import (
	"context"
	"errors"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// newPlugin makes the thread's one Plugin. The Manager allows one live
// Plugin per owner (bgtask.ErrReceiverExists): the server makes the next one
// only once the thread's previous Plugin is closed (closePlugin), and that
// one gets what the closed one left.
func newPlugin(m *bgtask.Manager, thread string, onWake func(bgtype.Event)) (*agent.Plugin, error) {
	return agent.NewPlugin(m, thread, agent.WithOnWake(onWake))
}

// startRun opens the thread's run for one turn. The first run of a thread's
// Plugin also restores the records a killed process, or the thread's closed
// Plugin, left: their interrupted events, and the ends never announced,
// come with this turn.
func startRun(ctx context.Context, p *agent.Plugin, runID string) error {
	return p.RunStart(ctx, bgtask.RunInfo{RunID: runID})
}

// endRun ends the turn's run. Only the user's stop (turnCtx cancelled with
// a userStop, which matches bgtask.ErrRunStopped) cancels the run's tasks,
// with the user's reason (bgtask.StopReason when none was given), which the
// model reads in each cancelled event; a turn the client walked away from,
// or that failed, ends with its tasks running on, and what they report
// comes to the next turn. A turn that ended before the model's answer
// (answered false) is aborted: the events it was handed are kept in the
// thread's history, and marked heard only once a later turn's model
// answered them (or handed out again if the thread is evicted first).
func endRun(ctx, turnCtx context.Context, p *agent.Plugin, runID string, answered bool) error {
	out := bgtask.RunOutcome{RunID: runID, Canceled: bgtask.RunStopped(turnCtx), Aborted: !answered}
	if stop, ok := errors.AsType[userStop](context.Cause(turnCtx)); ok {
		out.Reason = stop.reason
	}
	return p.RunEnd(ctx, out)
}

// userStop is the cause a turn the user stopped is cancelled with: it
// matches bgtask.ErrRunStopped and carries the user's reason ("" for none).
type userStop struct{ reason string }

func (userStop) Error() string { return bgtask.ErrRunStopped.Error() }
func (userStop) Unwrap() error { return bgtask.ErrRunStopped }

// closePlugin forgets an evicted thread's Plugin: its tasks go on, and what
// they report goes to the thread's next Plugin, once.
func closePlugin(ctx context.Context, p *agent.Plugin) error {
	return p.Close(ctx)
}
