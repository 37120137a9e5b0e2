package main

// This file holds every call the server makes to the threads' lifecycle
// (the registry that makes one Plugin per thread and closes it, opening
// and ending a turn's run), so that the changes of that API touch this
// file only.

import (
	"context"
	"errors"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// newThreads returns the registry of s's threads. It makes a thread's one
// Plugin at its first message (the Manager allows one live Plugin per
// owner: the registry makes the next one only once the thread's previous
// Plugin is closed, and that one gets what the closed one left), and
// evicts the least recently used idle thread at cfg.maxThreads, or one
// idle for cfg.idleTimeout: its Plugin is closed (its tasks go on, and
// what they report goes to the thread's next Plugin, once), its
// conversation dropped.
func newThreads(s *server) (*agent.Threads[*thread], error) {
	return agent.NewThreads(s.m, agent.ThreadsConfig[*thread]{
		MaxThreads:  s.cfg.maxThreads,
		IdleTimeout: s.cfg.idleTimeout,
		New: func(_ context.Context, id string, p *agent.Plugin) (*thread, error) {
			return s.newThread(id, p)
		},
		OnWake: func(lt *agent.Thread[*thread], ev bgtype.Event) { lt.Value().woken(s.log, ev) },
		OnClose: func(lt *agent.Thread[*thread], why agent.CloseReason, err error) {
			var idle []any
			switch why {
			case agent.CloseShutdown:
				return // the server stops: nothing to say per thread
			case agent.CloseIdle:
				idle = []any{"idle", true}
			}
			if err != nil {
				s.log.Error("evict", append([]any{"thread", lt.ID(), "err", err}, idle...)...)
			} else {
				s.log.Info("evict", append([]any{"thread", lt.ID()}, idle...)...)
			}
		},
		Logger: s.log,
	})
}

// startTurn waits for the thread's turn (one at a time; a client that
// leaves while waiting gives up its place) and opens its run. The first
// run of a thread's Plugin also restores the records a killed process, or
// the thread's closed Plugin, left: their interrupted events, and the ends
// never announced, come with this turn. In a fleet, a run of the thread
// open on another instance fails it with bgtask.ErrRunOpen.
func startTurn(ctx context.Context, lt *agent.Thread[*thread], runID string) (*agent.Turn, error) {
	return lt.Turn(ctx, bgtask.RunInfo{RunID: runID})
}

// endRun ends the turn's run. Only the user's stop (turnCtx cancelled with
// a *bgtask.RunStoppedError) cancels the run's tasks, with the user's
// reason (bgtask.StopReason when none was given), which the model reads in
// each cancelled event; a turn the client walked away from, or that
// failed, ends with its tasks running on, and what they report comes to
// the next turn. A turn that ended before the model's answer (answered
// false) is aborted: the events it was handed are kept in the thread's
// history, and marked heard only once a later turn's model answered them
// (or handed out again if the thread is evicted first).
func endRun(ctx, turnCtx context.Context, turn *agent.Turn, answered bool) error {
	out := bgtask.RunOutcome{Canceled: bgtask.RunStopped(turnCtx), Aborted: !answered}
	if stop, ok := errors.AsType[*bgtask.RunStoppedError](context.Cause(turnCtx)); ok {
		out.Reason = stop.Reason
	}
	return turn.End(ctx, out)
}
