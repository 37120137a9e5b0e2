package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage: bgtask <command> [flags] [ID]

Commands:
  ls      list tasks across owners (filters: --owner, --status, --tag, --run; --json)
  tree    draw a task's lineage: bgtask tree ID
  show    show every field of a task: bgtask show ID
  cancel  ask the process that runs a task to cancel it: bgtask cancel ID [--tree] [--reason R]
  watch   list tasks live, redrawn every --interval (filters as ls; --count N stops after N draws)

Store (one of):
  --db PATH   a SQLite file (or BGTASK_DB)
  --dsn DSN   a PostgreSQL URL (or BGTASK_DSN)

Run "bgtask <command> -h" for a command's flags.
`

// env is what a command reaches of the outside world, so that tests can
// replace it.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// tick returns a channel that receives every d, and its stop.
	tick func(d time.Duration) (<-chan time.Time, func())
	// terminal reports whether w is a terminal (watch redraws in place).
	terminal func(w io.Writer) bool
}

func defaultEnv(stdout, stderr io.Writer) *env {
	return &env{
		stdout: stdout,
		stderr: stderr,
		getenv: os.Getenv,
		now:    time.Now,
		tick: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
		terminal: isTerminal,
	}
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run runs the command line args (without the program name), writing to
// stdout and stderr, and returns the exit status. ctx ends a watch.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return defaultEnv(stdout, stderr).run(ctx, args)
}

// errUsage marks an error of the command line: exit status 2, with the
// usage on stderr.
var errUsage = errors.New("usage")

func (e *env) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	cmds := map[string]func(context.Context, []string) error{
		"ls":     e.ls,
		"tree":   e.tree,
		"show":   e.show,
		"cancel": e.cancel,
		"watch":  e.watch,
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		fmt.Fprint(e.stdout, usage)
		return exitOK
	}
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(e.stderr, "bgtask: unknown command %q\n%s", name, usage)
		return exitUsage
	}
	err := cmd(ctx, args[1:])
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "bgtask: %v\n", err)
	return exitFail
}
