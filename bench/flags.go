package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
)

// envDSN names the environment variable that gives the PostgreSQL DSN when
// -dsn is not set.
const envDSN = "BGTASK_BENCH_DSN"

// config is what the flags chose.
type config struct {
	rounds int
	quick  bool
	only   *regexp.Regexp // nil: every row
	dsn    string         // "": the PostgreSQL rows are skipped
	sz     sizes
}

func parseFlags(args []string, errw io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(errw)
	rounds := fs.Int("rounds", 5, "interleaved rounds; every cell is the median of them")
	quick := fs.Bool("quick", false, "small sizes: checks that every row runs, measures nothing meaningful")
	only := fs.String("only", "", "measure only the rows whose name matches this regular expression")
	dsn := fs.String("dsn", "", "PostgreSQL DSN for the PostgreSQL rows (default $"+envDSN+"); they make and drop a schema of their own")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *rounds < 1 {
		return config{}, fmt.Errorf("-rounds %d: want at least 1", *rounds)
	}
	cfg := config{rounds: *rounds, quick: *quick, dsn: *dsn, sz: fullSizes}
	if cfg.dsn == "" {
		cfg.dsn = os.Getenv(envDSN)
	}
	if *quick {
		cfg.sz = quickSizes
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return config{}, fmt.Errorf("-only: %w", err)
		}
		cfg.only = re
	}
	return cfg, nil
}

// sizes are the workload sizes of every row.
type sizes struct {
	spawns       int // spawn+complete: tasks per sample, one after another
	burst        int // tasks in a burst
	emits        int // events per emit/drain sample
	parked       int // parked tasks per memory sample
	retainOwners int // owners of the retained-memory row
	retainTasks  int // tasks per owner in the retained-memory row
	live         int // live tasks beside the cancelled subtree
	subtree      int // tasks in the cancelled subtree
	cancels      int // subtrees cancelled per sample
	million      int // tasks of the many-owners row
	owners       int // owners of the many-owners row
	checkpoint   int // heap measured every this many tasks
	sqlCommits   int // commits per store sample
	batch        int // rows per batched commit
	writers      int // concurrent writers
	pgTasks      int // tasks per sample of the PostgreSQL tasks rows (a burst has burst)
}

var fullSizes = sizes{
	spawns: 20_000, burst: 10_000, emits: 100_000, parked: 10_000,
	retainOwners: 100, retainTasks: 2_000,
	live: 100_000, subtree: 100, cancels: 20,
	million: 1_000_000, owners: 1_000, checkpoint: 100_000,
	sqlCommits: 2_000, batch: 64, writers: 8, pgTasks: 2_000,
}

var quickSizes = sizes{
	spawns: 200, burst: 200, emits: 500, parked: 200,
	retainOwners: 10, retainTasks: 50,
	live: 500, subtree: 100, cancels: 2,
	million: 4_000, owners: 100, checkpoint: 1_000,
	sqlCommits: 20, batch: 64, writers: 8, pgTasks: 40,
}
