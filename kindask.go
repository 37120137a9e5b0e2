package bgtask

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// errAskDrained cancels an exhausted task's question when its Manager
// begins to stop: the task goes back to the queue, to be asked again.
var errAskDrained = errors.New("bgtask: stopping: the question goes with the task")

// askOwner asks the owner of an exhausted task (KindConfig.ExhaustAsk)
// whether to resume it, last being why its last attempt ended. It returns
// nil once the owner said "resume" and the granted round is on the
// record; the gave-up error for "abandon"; a requeue when the Manager
// began to stop meanwhile; ctx's cause when the task was cancelled.
func (k *Kind[S, C]) askOwner(ctx context.Context, t *Task, last error) error {
	meta := t.record()
	r := meta.Resume
	n := r.Limit()
	gaveUp := fmt.Errorf("gave up after %d attempts (kind %s): %w", n, k.name, last)
	ask := fmt.Sprintf("Task %s (kind %s) gave up after %d attempts: %v. Answer \"resume\" to run up to %d more attempts from its last checkpoint, or \"abandon\" to end it with that error.",
		meta.ID, k.name, n, last, r.MaxAttempts)
	prompt := ask
	askCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-t.m.drain:
			cancel(errAskDrained)
		case <-askCtx.Done():
		}
	}()
	for {
		msg, err := t.RequestInput(askCtx, prompt)
		switch {
		case errors.Is(err, errAskDrained):
			// Not a yield for an exhausted attempt: the next one is counted
			// past the limit, so whoever claims it asks again first.
			return &requeueError{why: t.m.stopWhy(), yield: r.Counted(meta.Attempt) > n}
		case err != nil:
			return err
		}
		switch strings.ToLower(strings.TrimSpace(msg.Content)) {
		case "resume":
			return k.grantRound(t)
		case "abandon":
			return gaveUp
		}
		prompt = fmt.Sprintf("Answer \"resume\" or \"abandon\" (the answer was %q). %s", msg.Content, ask)
	}
}

// grantRound records the owner's grant: another MaxAttempts attempts.
func (k *Kind[S, C]) grantRound(t *Task) error {
	u := t.record()
	u.Resume = u.Resume.Clone()
	u.Resume.Rounds++
	if err := t.m.commitUpdate(t, &u); err != nil {
		return fmt.Errorf("bgtask: kind %s: record the owner's resume: %w", k.name, err)
	}
	return nil
}
