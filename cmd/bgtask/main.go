// Command bgtask inspects the tasks that applications built on bgtask keep
// in a SQLite file or a PostgreSQL database: it lists them across owners,
// draws a task's lineage, shows every field of one, watches them live, and
// asks the process that runs a task to cancel it. Cancel requests are the
// only thing it writes.
//
//	bgtask ls --db tasks.db --status running,awaiting_input
//	bgtask tree --dsn postgres://localhost/app task_abc
//	bgtask show task_abc
//	bgtask cancel --tree --reason "stuck" task_abc
//	bgtask watch --owner thread-1 --interval 2s
//
// The store is given with --db (a SQLite file) or --dsn (a PostgreSQL
// URL), or with the environment variables BGTASK_DB and BGTASK_DSN.
// Exit status: 0 on success, 1 when the command failed, 2 for a usage
// error.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
