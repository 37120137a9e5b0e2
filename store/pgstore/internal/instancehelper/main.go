// Command instancehelper runs one bgtask runtime instance on a pgstore
// Store, for the crash tests: a Manager with -tasks tasks of -owner that
// run until cancelled. It prints "task <id>" for each and then "ready", and
// then obeys lines on stdin:
//
//	cancel <id>   Manager.Cancel; prints "cancelled <n> <error or ok>"
//	list <owner>  prints "meta <json>" for each of the owner's records, then "end"
//	quit          shuts the Manager down, closes the Store, prints "bye", exits
//
// EOF on stdin is quit. The tests kill it with SIGKILL to simulate a crash.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "instancehelper:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dsn       = flag.String("dsn", "", "database DSN")
		instance  = flag.String("instance", "", "runtime instance id")
		owner     = flag.String("owner", "alice", "owner of the spawned tasks")
		tasks     = flag.Int("tasks", 0, "tasks to spawn")
		heartbeat = flag.Duration("heartbeat", 100*time.Millisecond, "heartbeat interval")
		grace     = flag.Duration("grace", time.Hour, "grace period (long: the tests date heartbeats back rather than wait)")
		poll      = flag.Duration("poll", 100*time.Millisecond, "cancel poll interval")
		backoff   = flag.Duration("backoff", 100*time.Millisecond, "listener reconnect backoff (min and max)")
	)
	flag.Parse()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, *dsn, pgstore.WithHeartbeatInterval(*heartbeat), pgstore.WithGrace(*grace),
		pgstore.WithPollInterval(*poll), pgstore.WithReconnectBackoff(*backoff, *backoff))
	if err != nil {
		return err
	}
	defer s.Close()
	m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(*instance))
	if err != nil {
		return err
	}
	if err := s.Start(ctx, m); err != nil {
		return err
	}
	for range *tasks {
		id, err := m.Owner(*owner).Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil {
			return err
		}
		fmt.Println("task", id)
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "cancel":
			n, err := m.Cancel(ctx, arg)
			res := "ok"
			if err != nil {
				res = err.Error()
			}
			fmt.Println("cancelled", n, res)
		case "list":
			for meta, err := range s.List(ctx, arg) {
				if err != nil {
					return err
				}
				b, _ := json.Marshal(meta)
				fmt.Println("meta", string(b))
			}
			fmt.Println("end")
		case "quit":
			return quit(m, s)
		default:
			fmt.Println("unknown command", cmd)
		}
	}
	return quit(m, s)
}

func quit(m *bgtask.Manager, s *pgstore.Store) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Shutdown(ctx); err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	fmt.Println("bye")
	return nil
}
