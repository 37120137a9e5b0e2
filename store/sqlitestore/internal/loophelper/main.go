// Command loophelper is the process that TestCrashLoopExactlyOnce starts and
// kills: an owner's agent loop on the SQLite file -db, with plain tasks,
// sub-agents and their children (see package crashloop, which does the
// work; this program only opens the store). Every mark its Plugins commit
// is logged around the Commit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/internal/crashloop"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

func main() {
	var o crashloop.Options
	o.Register(flag.CommandLine)
	path := flag.String("db", "", "SQLite file")
	flag.Parse()
	err := crashloop.Helper(o, func(ctx context.Context, log *crashloop.Log) (crashloop.Opened, error) {
		// A long busy timeout: two processes write the file, and a loaded
		// machine must not turn a wait for the lock into a failed commit.
		st, err := sqlitestore.Open(ctx, *path, sqlitestore.WithBusyTimeout(time.Minute))
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

// store is the SQLite store with its marks logged. Embedding keeps every
// other method (and so every optional interface) of the real one.
type loggingStore struct {
	*sqlitestore.Store
	log *crashloop.Log
}

func (s *loggingStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	done := s.log.Commit(ctx, actions)
	err := s.Store.Commit(ctx, owner, actions...)
	done(err)
	return err
}
