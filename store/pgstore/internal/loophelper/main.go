// Command loophelper is the process that TestCrashLoopExactlyOnce starts and
// kills: a runtime instance on the PostgreSQL database -dsn (heartbeat,
// reaper and cancel listener started) that runs an owner's agent loop with
// plain tasks, sub-agents and their children (see package crashloop, which
// does the work; this program only opens the store). Every mark its
// Plugins commit is logged around the Commit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/internal/crashloop"
	"github.com/bgtask/bgtask/store/pgstore"
)

func main() {
	var o crashloop.Options
	o.Register(flag.CommandLine)
	var (
		dsn       = flag.String("dsn", "", "database DSN")
		heartbeat = flag.Duration("heartbeat", 100*time.Millisecond, "heartbeat and reaper interval")
		grace     = flag.Duration("grace", time.Hour, "grace period (long: the test dates a killed instance's heartbeat back rather than wait)")
	)
	flag.Parse()
	err := crashloop.Helper(o, func(ctx context.Context, log *crashloop.Log) (crashloop.Opened, error) {
		st, err := pgstore.Open(ctx, *dsn, pgstore.WithHeartbeatInterval(*heartbeat), pgstore.WithGrace(*grace))
		if err != nil {
			return crashloop.Opened{}, err
		}
		return crashloop.Opened{Store: &loggingStore{Store: st, log: log}, Start: st.Start, Close: st.Close}, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "loophelper:", err)
		os.Exit(1)
	}
}

// store is the PostgreSQL store with its marks logged. Embedding keeps
// every other method (and so every optional interface, SharedStore
// included) of the real one.
type loggingStore struct {
	*pgstore.Store
	log *crashloop.Log
}

func (s *loggingStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	done := s.log.Commit(ctx, actions)
	err := s.Store.Commit(ctx, owner, actions...)
	done(err)
	return err
}
