package main

// This file holds every call the server makes to the Plugin's lifecycle
// (making one per thread, opening and ending a run, forgetting a thread),
// so that the changes of that API touch this file only.

import (
	"context"
	"errors"

	"github.com/bgtask/bgtask"
)

// errUserStop is the cause of a turn's context when the user stopped it
// (POST /threads/{id}/stop): the run ends cancelled, with its tasks. A
// client that hangs up ends the model call with the request's own cause
// instead, and the run ends without cancelling anything.
var errUserStop = errors.New("stopped by the user")

// newPlugin makes the thread's one Plugin. The server keeps it for as long
// as the process runs: a second Plugin of one owner would take the first
// one's inbox over, so a thread is never given a new one.
func newPlugin(m *bgtask.Manager, thread string, onWake func(bgtask.Event)) (*bgtask.Plugin, error) {
	return bgtask.NewPlugin(m, thread, bgtask.WithOnWake(onWake))
}

// startRun opens the thread's run for one turn. The first run of a thread
// in this process also restores the records a killed process left: their
// interrupted events, and the ends it never announced, come with this turn.
func startRun(ctx context.Context, p *bgtask.Plugin, runID string) error {
	return p.RunStart(ctx, bgtask.RunInfo{RunID: runID})
}

// endRun ends the turn's run. Only a user stop (cause errUserStop) cancels
// the run's tasks; a turn the client walked away from, or that failed, ends
// with its tasks running on, and what they report comes to the next turn.
func endRun(ctx context.Context, p *bgtask.Plugin, runID string, cause error) error {
	_ = runID // the run is the Plugin's open one
	return p.RunEnd(ctx, bgtask.RunOutcome{Cancelled: errors.Is(cause, errUserStop)})
}
