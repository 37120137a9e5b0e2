// Command bench measures bgtask side by side with raw goroutines, errgroup
// and conc, and its stores side by side with raw SQL, and prints one table
// with the ratios.
//
//	cd bench
//	go run .                 # every row, medians of 5 rounds
//	go run . -rounds 9 -only 'burst|SQLite'
//	go run . -dsn 'postgres://user@localhost/scratch'  # adds the PostgreSQL rows
//
// Rounds are interleaved: every round measures every row and every
// contender once, so a machine that slows down during the run slows all of
// them alike; each cell is the median of the rounds. Times are wall clock
// per task (or per row written); bytes and allocations per task come from
// runtime.MemStats; memory rows read the heap (and stacks) after a full
// garbage collection. A ratio is bgtask's figure divided by the peer's:
// lower is better, 1.00x is parity.
//
// The PostgreSQL rows need a server: give its DSN with -dsn or in
// BGTASK_BENCH_DSN. They create a schema of their own in that database and
// drop it at the end.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// run parses args, measures the selected rows and writes the table to out;
// progress goes to errw. It is main without the process around it, so that
// the test runs the same code.
func run(ctx context.Context, args []string, out, errw io.Writer) error {
	cfg, err := parseFlags(args, errw)
	if err != nil {
		return err
	}
	groups := selectGroups(allGroups(cfg.sz), cfg.only)
	if len(groups) == 0 {
		return fmt.Errorf("-only %q matches no row", cfg.only)
	}
	res, err := measure(ctx, cfg, groups, errw)
	if err != nil {
		return err
	}
	writeHeader(out, cfg)
	writeTable(out, groups, res)
	return nil
}
