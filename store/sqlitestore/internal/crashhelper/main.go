// Command crashhelper is the process that TestCrashRecovery kills. It
// opens the SQLite store at -db, runs a bgtask.Manager on it as instance
// -instance, spawns -done tasks for -owner that complete at once and waits
// for them, then spawns -block tasks that never return (with at most
// -limit running, so the rest stay queued), and prints one line,
//
//	ready {"completed":["task_…",…],"blocked":["task_…",…]}
//
// after which it waits to be killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashhelper:", err)
		os.Exit(1)
	}
	select {} // wait for SIGKILL
}

func run() error {
	var (
		path     = flag.String("db", "", "SQLite file")
		owner    = flag.String("owner", "thread-1", "owner of the tasks")
		instance = flag.String("instance", "crashed", "runtime instance id")
		done     = flag.Int("done", 4, "tasks that complete at once")
		block    = flag.Int("block", 8, "tasks that never return")
		limit    = flag.Int("limit", 6, "tasks running at once; the rest are queued")
		quiet    = flag.String("quiet", "", "if set, an owner with one task that completes and is marked announced first")
		hushed   = flag.String("hushed", "", "if set, an owner with one silent task that completes first")
	)
	flag.Parse()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, *path)
	if err != nil {
		return err
	}
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(*instance),
		bgtask.WithLimits(bgtask.Limits{MaxConcurrent: *limit, QueueWhenFull: true}))
	if err != nil {
		return err
	}
	if err := quietOwners(ctx, m, *quiet, *hushed); err != nil {
		return err
	}
	agent := m.Owner(*owner)
	var out struct {
		Completed []string `json:"completed"`
		Blocked   []string `json:"blocked"`
	}
	for i := range *done {
		id, err := agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
			return map[string]int{"n": i}, nil
		}, bgtask.WithName(fmt.Sprintf("quick-%d", i)))
		if err != nil {
			return err
		}
		out.Completed = append(out.Completed, id)
	}
	for _, id := range out.Completed {
		if meta, err := agent.Wait(ctx, id); err != nil || meta.Status != bgtype.StatusCompleted {
			return fmt.Errorf("task %s: %s, %v", id, meta.Status, err)
		}
	}
	for i := range *block {
		id, err := agent.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done() // never cancelled: the process is killed first
			return nil, ctx.Err()
		}, bgtask.WithName(fmt.Sprintf("stuck-%d", i)))
		if err != nil {
			return err
		}
		out.Blocked = append(out.Blocked, id)
	}
	line, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("ready %s\n", line)
	return err
}

// quietOwners gives owner quiet a task whose end its loop took (marked
// announced) and owner hushed a silent task that ended: neither has
// anything to hear after the crash.
func quietOwners(ctx context.Context, m *bgtask.Manager, quiet, hushed string) error {
	done := func(context.Context, *bgtask.Task) (any, error) { return "done", nil }
	for _, o := range []struct {
		owner string
		opts  []bgtask.SpawnOption
	}{{quiet, nil}, {hushed, []bgtask.SpawnOption{bgtask.WithWake(bgtype.WakeSilent)}}} {
		if o.owner == "" {
			continue
		}
		own := m.Owner(o.owner)
		id, err := own.Spawn(ctx, done, o.opts...)
		if err != nil {
			return err
		}
		if meta, err := own.Wait(ctx, id); err != nil || meta.Status != bgtype.StatusCompleted {
			return fmt.Errorf("task %s: %s, %v", id, meta.Status, err)
		}
		if o.owner == quiet {
			if err := own.MarkAnnounced(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}
