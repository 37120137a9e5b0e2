// Command announcehelper is the process that TestCrashAnnouncesOnce kills.
// It opens the SQLite store at -db (which interrupts what a killed run
// left), runs a bgtask.Manager on it, restores -owner (which announces what
// a killed run never handed out), spawns -spawn tasks that complete after a
// short random time and -block tasks that never return, and prints
//
//	spawned <id>
//
// for each, then "ready". Its loop drains the owner's inbox at step
// boundaries: for each batch it prints "taking <id>" for every terminal
// event, commits the marks (Owner.MarkAnnounced), then prints "took <id>"
// for each. Once every completing task it spawned was taken and the inbox
// is empty it prints "idle"; with -exit it then shuts down and exits,
// otherwise it waits to be killed.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "announcehelper:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		path  = flag.String("db", "", "SQLite file")
		owner = flag.String("owner", "thread-1", "owner of the tasks")
		spawn = flag.Int("spawn", 10, "tasks that complete after a short random time")
		block = flag.Int("block", 2, "tasks that never return")
		seed  = flag.Uint64("seed", 1, "seed of the completion times")
		exit  = flag.Bool("exit", false, "exit once idle")
	)
	flag.Parse()
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush() // one write per line: a kill cuts between lines
	}
	st, err := sqlitestore.Open(ctx, *path)
	if err != nil {
		return err
	}
	m, err := bgtask.New(bgtask.WithStore(st))
	if err != nil {
		return err
	}
	o := m.Owner(*owner)
	ib, err := o.Inbox()
	if err != nil {
		return err
	}
	if _, err := m.Restore(ctx, *owner); err != nil && !errors.Is(err, bgtype.ErrCorrupt) {
		return err
	}
	rng := rand.New(rand.NewPCG(*seed, 7))
	pending := map[string]bool{}
	for range *spawn {
		d := time.Duration(rng.IntN(30)) * time.Millisecond
		id, err := o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			time.Sleep(d) // the child's own pace; the test waits on lines, not time
			return "ok", nil
		})
		if err != nil {
			return err
		}
		pending[id] = true
		say("spawned %s", id)
	}
	for range *block {
		id, err := o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil {
			return err
		}
		say("spawned %s", id)
	}
	say("ready")
	for {
		var ids []string
		for _, ev := range ib.Drain() {
			if ev.Kind.IsTerminal() {
				ids = append(ids, ev.TaskID)
			}
		}
		if len(ids) > 0 {
			for _, id := range ids {
				say("taking %s", id)
			}
			if err := o.MarkAnnounced(ctx, ids...); err != nil {
				return err
			}
			for _, id := range ids {
				say("took %s", id)
				delete(pending, id)
			}
			continue
		}
		if len(pending) == 0 {
			break
		}
		if err := ib.Wait(ctx); err != nil {
			return err
		}
	}
	say("idle")
	if !*exit {
		select {} // wait for SIGKILL
	}
	if err := m.Shutdown(ctx); err != nil {
		return err
	}
	return st.Close()
}
