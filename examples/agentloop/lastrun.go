package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// storedTasks returns the Store's records of owner's tasks and of the tasks
// they started, each after its parent.
func storedTasks(ctx context.Context, m *bgtask.Manager, owner string) ([]bgtype.TaskMeta, error) {
	var tasks []bgtype.TaskMeta
	var walk func(bgtype.TaskMeta) error
	walk = func(meta bgtype.TaskMeta) error {
		tasks = append(tasks, meta)
		for kid, err := range m.Store().Children(ctx, meta.ID) {
			if err != nil {
				return err
			}
			if err := walk(kid); err != nil {
				return err
			}
		}
		return nil
	}
	for meta, err := range m.Store().List(ctx, owner) {
		if err != nil {
			return nil, err
		}
		if meta.Parent.TaskID == "" {
			if err := walk(meta); err != nil {
				return nil, err
			}
		}
	}
	return tasks, nil
}

// summarizeLast says in one line what the previous run of the demo left:
// of tasks (storedTasks), those that the runtime instance of the most
// recently created one ran. It returns "" for no tasks.
//
// A task still recorded queued, running or awaiting input belongs to a
// process that is gone (this one has not started any yet): it was killed
// while running, and the first run reports it interrupted.
func summarizeLast(tasks []bgtype.TaskMeta) string {
	if len(tasks) == 0 {
		return ""
	}
	latest := tasks[0]
	for _, t := range tasks[1:] {
		if t.CreatedAt.After(latest.CreatedAt) && t.Instance != "" || latest.Instance == "" {
			latest = t // a task waiting to be resumed names no instance
		}
	}
	counts := map[bgtype.Status]int{}
	total := 0
	for _, t := range tasks {
		if t.Instance != latest.Instance && !(t.Resume != nil && !t.Status.IsTerminal()) {
			continue
		}
		total++
		status := t.Status
		switch {
		case !status.IsTerminal() && t.Resume != nil:
			status = resuming // a resumable kind: this run resumes it
		case !status.IsTerminal():
			status = bgtype.StatusInterrupted
		}
		counts[status]++
	}
	return summarize(total, counts)
}

// resuming stands for a resumable task a killed run left: it is resumed,
// not interrupted.
const resuming bgtype.Status = "resuming"

// summarize writes "last run: 7 tasks: 5 completed, 1 cancelled, 1
// interrupted (killed while running)", statuses in a fixed order.
func summarize(total int, counts map[bgtype.Status]int) string {
	labels := []struct {
		status bgtype.Status
		label  string
	}{
		{bgtype.StatusCompleted, "completed"},
		{bgtype.StatusFailed, "failed"},
		{bgtype.StatusCanceled, "cancelled"},
		{bgtype.StatusInterrupted, "interrupted (killed while running)"},
		{resuming, "to resume from a checkpoint"},
	}
	var parts []string
	for _, l := range labels {
		if n := counts[l.status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, l.label))
		}
	}
	noun := "tasks"
	if total == 1 {
		noun = "task"
	}
	return fmt.Sprintf("last run: %d %s: %s", total, noun, strings.Join(parts, ", "))
}
