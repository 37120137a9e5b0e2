// Command agentloop is bgtask's main demo: a lead agent, played by a
// scripted model (no network), starts research sub-agents and a slow
// indexing tool in the background and keeps talking. The terminal shows
// live progress, the events each step delivers to the model, one
// sub-agent cancelled together with the tasks it started, and at the end a
// summary and the task table with its lineage drawn as a tree.
//
// Task metadata is kept in a SQLite file (-db), the embedded default
// store: start the demo, kill it while tasks run, start it again, and the
// second run reports the first run's tasks as interrupted, one event each.
//
//	go run ./examples/agentloop [-agents 3] [-speed 1] [-db path]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// config is what the flags choose.
type config struct {
	agents int     // research sub-agents to start
	speed  float64 // >1 runs faster
	db     string  // the SQLite file
}

func main() {
	var cfg config
	flag.IntVar(&cfg.agents, "agents", 3, "number of research sub-agents (1 to 9)")
	flag.Float64Var(&cfg.speed, "speed", 1, "speed factor: 2 runs twice as fast")
	flag.StringVar(&cfg.db, "db", filepath.Join(os.TempDir(), "bgtask-agentloop.db"), "SQLite file that keeps the task metadata")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		os.Exit(1)
	}
}

// run is the demo: it returns once every task has ended and the Manager
// has shut down.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.agents < 1 || cfg.agents > 9 {
		return fmt.Errorf("-agents %d: want 1 to 9", cfg.agents)
	}
	if cfg.speed <= 0 {
		return fmt.Errorf("-speed %v: want more than 0", cfg.speed)
	}
	ui := newScreen(out)
	store, err := sqlitestore.Open(ctx, cfg.db)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	m, err := bgtask.New(bgtask.WithStore(store), bgtask.WithObserver(ui.transition))
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, m.Shutdown(sctx))
	}()
	ui.printf("task metadata in %s\n", cfg.db)
	started := time.Now()

	const owner = "thread-lead"
	wake := make(chan struct{}, 1)
	plugin, err := bgtask.NewPlugin(m, owner, bgtask.WithOnWake(func(bgtask.Event) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		return err
	}
	d := &demo{m: m, ui: ui, cfg: cfg}
	lead := newLeadModel(cfg.agents, plugin)
	tools := append(d.hostTools(), taskTools(plugin.Owner())...)
	conv := []agentloop.Message{{Role: "user", Content: "Research the three storage engines and index the repository."}}

	// The host's loop of runs: a run that ends waiting for tasks is
	// continued when one of them reports (the plugin's WithOnWake).
	for i := 1; ; i++ {
		select { // this run delivers whatever woke the host
		case <-wake:
		default:
		}
		run := fmt.Sprintf("run-%d", i)
		ui.printf("\n== %s ==\n", run)
		res, err := agentloop.Run(ctx, agentloop.Config{
			Model: lead, Tools: tools, Hooks: plugin, RunID: run, AgentID: "lead", OnStep: ui.step,
		}, conv)
		if err != nil {
			return err
		}
		conv = res.Conversation
		ui.printf("%s ended %s (%s) after %d step(s)\n", run, res.Status, res.Reason, res.Steps)
		if res.Status != agentloop.StatusWaiting {
			ui.printf("\nSummary: %s\n", res.Response)
			break
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return ui.taskTree(ctx, m, owner, started)
}
