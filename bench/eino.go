package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cloudwego/eino/adk/backgroundtask"
)

// The eino contender is the closest Go peer of bgtask: the background-task
// registry of eino's agent development kit (package adk/backgroundtask),
// measured on the shapes both libraries serve. A task there is a Run of
// eino's Manager with RunInBackground, its end awaited with the Manager's
// Wait; it keeps every record in memory and has no inbox, store or owner.

// einoAnswer is the eino task that completes at once with the result 42.
func einoAnswer(context.Context, backgroundtask.TaskInfo) (string, error) { return "42", nil }

// withEino runs f with a new eino Manager and closes it afterwards,
// cancelling what is still running.
func withEino(ctx context.Context, f func(m *backgroundtask.Manager) error) error {
	m := backgroundtask.New(ctx, &backgroundtask.Config{})
	err := f(m)
	done, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cancel() // Close waits for running tasks until its context ends: cancel them at once
	if cerr := m.Close(done); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return err
}

// einoRun starts a background eino task and returns its id.
func einoRun(ctx context.Context, m *backgroundtask.Manager, work backgroundtask.WorkFunc) (string, error) {
	task, err := m.Run(ctx, &backgroundtask.RunInput{RunInBackground: true}, work)
	if err != nil {
		return "", err
	}
	return task.ID, nil
}

// einoAwait waits for task id to end and checks that it completed with 42.
func einoAwait(ctx context.Context, m *backgroundtask.Manager, id string) error {
	task, done := m.Wait(ctx, id)
	switch {
	case !done:
		return fmt.Errorf("eino task %s: not done: %w", id, ctx.Err())
	case task.Status != backgroundtask.StatusCompleted || task.Result != "42":
		return fmt.Errorf("eino task %s: %s %q, want completed with 42", id, task.Status, task.Result)
	}
	return nil
}

func einoSpawnComplete(ctx context.Context, cfg config) (s sample, err error) {
	err = withEino(ctx, func(m *backgroundtask.Manager) error {
		s, err = timed(cfg.sz.spawns, func() error {
			for range cfg.sz.spawns {
				id, err := einoRun(ctx, m, einoAnswer)
				if err != nil {
					return err
				}
				if err := einoAwait(ctx, m, id); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	return s, err
}

func einoBurst(ctx context.Context, cfg config) (s sample, err error) {
	n := cfg.sz.burst
	err = withEino(ctx, func(m *backgroundtask.Manager) error {
		ids := make([]string, n)
		s, err = timed(n, func() error {
			for i := range n {
				id, err := einoRun(ctx, m, einoAnswer)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			for _, id := range ids {
				if err := einoAwait(ctx, m, id); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	return s, err
}

func einoParked(ctx context.Context, cfg config) (sample, error) {
	k := cfg.sz.parked
	return parkedBytes(k, func() (func() error, error) {
		m := backgroundtask.New(ctx, &backgroundtask.Config{})
		var started, ended sync.WaitGroup
		started.Add(k)
		ended.Add(k)
		work := func(ctx context.Context, _ backgroundtask.TaskInfo) (string, error) {
			defer ended.Done()
			started.Done()
			<-ctx.Done()
			return "", ctx.Err()
		}
		stop := func() error {
			done, cancel := context.WithCancel(context.WithoutCancel(ctx))
			cancel()
			err := m.Close(done)
			ended.Wait() // Close cancels the tasks but does not wait for their goroutines
			return err
		}
		for i := range k {
			if _, err := einoRun(ctx, m, work); err != nil {
				started.Add(i - k)
				ended.Add(i - k)
				return nil, errors.Join(err, stop())
			}
		}
		started.Wait()
		return stop, nil
	})
}
