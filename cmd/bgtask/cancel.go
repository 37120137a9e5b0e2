package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask"
)

// cancel asks the process that runs a task to cancel it (with --tree, its
// attached descendants too). It writes a cancel request, the one write the
// inspector makes, and returns once the request is recorded. A task that
// has ended is reported as such and nothing is written.
func (e *env) cancel(ctx context.Context, args []string) error {
	fs, sf := e.flags("cancel", " ID")
	tree := fs.Bool("tree", false, "cancel the task's attached descendants too")
	reason := fs.String("reason", "", "why: kept on the cancelled record")
	pos, err := e.parse(fs, args, 1)
	if err != nil {
		return err
	}
	src, err := e.open(ctx, fs, sf)
	if err != nil {
		return err
	}
	defer src.close()
	id := pos[0]
	m, err := src.cancel(ctx, id, *tree, *reason)
	if errors.Is(err, bgtask.ErrNotFound) {
		return fmt.Errorf("no task %s", clean(id))
	}
	if err != nil {
		return err
	}
	if m.Status.IsTerminal() {
		_, err = fmt.Fprintf(e.stdout, "task %s already %s: nothing to cancel\n", clean(id), clean(string(m.Status)))
		return err
	}
	what := "task"
	if *tree {
		what = "task tree"
	}
	_, err = fmt.Fprintf(e.stdout, "cancel of %s %s requested (%s on instance %s)\n", what, clean(id), clean(string(m.Status)), orDash(m.Instance))
	return err
}
