package crashloop

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// Options are the flags every helper takes (Run passes them).
type Options struct {
	Instance string
	Log      string
	Owner    string
	Seed     uint64
	Stop     int
	StopRun  int
	Plain    int
	Agents   int
	Child    int
}

// Register defines the flags in fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Instance, "instance", "", "runtime instance id")
	fs.StringVar(&o.Log, "log", "", "this process's log")
	fs.StringVar(&o.Owner, "owner", "thread-1", "the owner whose loop runs here")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of what the loop spawns and how long tasks take")
	fs.IntVar(&o.Stop, "stop", 0, "the owner loop's write after which it stops for good (0: never)")
	fs.IntVar(&o.StopRun, "stop-runstart", 0, "the owner loop's RunStart after which it stops for good (0: never)")
	fs.IntVar(&o.Plain, "plain", 8, "plain tasks to spawn")
	fs.IntVar(&o.Agents, "agents", 2, "sub-agents to spawn")
	fs.IntVar(&o.Child, "children", 3, "children per sub-agent")
}

// Opened is a helper's store.
type Opened struct {
	// Store is the store the Manager uses; its Commit must call
	// Log.Commit around the real one.
	Store store.Store
	// Start, if set, starts the store's background work for the Manager.
	Start func(context.Context, store.Runtime) error
	// Close closes the store.
	Close func() error
}

// Helper runs a helper process: it opens the log (echoed to stdout), the
// store (open), a Manager on it as o.Instance, and Serves the test's
// commands from stdin; once done it shuts the Manager down and closes the
// store.
func Helper(o Options, open func(context.Context, *Log) (Opened, error)) error {
	ctx := context.Background()
	log, err := OpenLog(o.Log, os.Stdout, o.Stop)
	if err != nil {
		return err
	}
	defer log.Close()
	st, err := open(ctx, log)
	if err != nil {
		return err
	}
	m, err := bgtask.New(bgtask.WithStore(st.Store), bgtask.WithInstance(o.Instance), bgtask.WithObserver(log.Observe))
	if err != nil {
		return errors.Join(err, st.Close())
	}
	if st.Start != nil {
		if err := st.Start(ctx, m.Runtime()); err != nil {
			return errors.Join(err, st.Close())
		}
	}
	err = Serve(ctx, Config{Manager: m, Log: log, Owner: o.Owner, Seed: o.Seed, Plain: o.Plain, Agents: o.Agents, Child: o.Child, In: os.Stdin, StopRunStart: o.StopRun})
	return errors.Join(err, m.Shutdown(ctx), st.Close())
}
