// Command agentloop is bgtask's main demo: a lead agent, played by a
// scripted model (no network), starts research sub-agents and a slow
// indexing tool in the background, runs the test suite with a tool that
// waits for it in the foreground and promotes it to a background task when
// it is slow (bgtask's Owner.Foreground), and keeps talking. The terminal shows
// live progress, the events each step delivers to the model, one
// sub-agent cancelled together with the tasks it started, and at the end a
// summary and the task table with its lineage drawn as a tree.
//
// Task metadata is kept in a SQLite file, the embedded default store, in
// the user's cache directory (-db chooses another file, -reset deletes it
// first): start the demo, kill it while tasks run, start it again, and the
// second run reports the first run's tasks as interrupted, one event each,
// but for the indexer, a resumable kind: it resumes from its checkpoint.
// Each start summarizes in one line what the previous one left.
//
// On a terminal the tasks' progress is drawn as bars redrawn in place;
// piped or redirected, the output is plain lines.
//
//	go run ./examples/agentloop [-agents 3] [-speed 1] [-db path] [-reset]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/vbauerster/mpb/v8/cwriter"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/agentloop"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// config is what the flags choose.
type config struct {
	agents int     // research sub-agents to start
	speed  float64 // >1 runs faster
	db     string  // the SQLite file
	reset  bool    // delete db first
	live   bool    // out is a terminal: draw progress bars in place
}

func main() {
	var cfg config
	flag.IntVar(&cfg.agents, "agents", 3, "number of research sub-agents (1 to 9)")
	flag.Float64Var(&cfg.speed, "speed", 1, "speed factor: 2 runs twice as fast")
	flag.StringVar(&cfg.db, "db", defaultDB(), "SQLite file that keeps the task metadata")
	flag.BoolVar(&cfg.reset, "reset", false, "delete the SQLite file first, forgetting earlier runs")
	flag.Parse()
	cfg.live = cwriter.IsTerminal(int(os.Stdout.Fd()))
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
	if cfg.reset {
		if err := removeDB(cfg.db); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.db), 0o755); err != nil {
		return err
	}
	ui := newScreen(out, cfg.live)
	defer ui.closeBars()
	store, err := sqlitestore.Open(ctx, cfg.db)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	d := &demo{ui: ui, cfg: cfg}
	if d.index, err = bgtask.NewKind("index/v1", d.indexFiles, bgtask.KindConfig{}); err != nil {
		return err
	}
	m, err := bgtask.New(bgtask.WithStore(store), bgtask.WithObserver(ui.transition), bgtask.WithKinds(d.index))
	if err != nil {
		return err
	}
	d.m = m
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, m.Shutdown(sctx))
	}()
	if err := store.Start(ctx, m.Runtime()); err != nil { // `bgtask cancel ID` from another terminal reaches the tasks
		return err
	}
	const owner = "thread-lead"
	ui.printf("task metadata in %s\n", cfg.db)
	if cfg.reset {
		ui.printf("(deleted by -reset: no earlier runs)\n")
	}
	earlier, err := storedTasks(ctx, m, owner)
	if err != nil {
		return err
	}
	if last := summarizeLast(earlier); last != "" {
		ui.printf("%s\n", last)
	}
	ui.learnLabels(earlier) // the first run reports the killed ones by name
	started := time.Now()

	w := newWaker(m.Owner(owner), time.Duration(float64(50*time.Millisecond)/cfg.speed))
	plugin, err := agent.NewPlugin(m, owner, agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: w.onWake}})
	if err != nil {
		return err
	}
	defer plugin.Close(context.WithoutCancel(ctx)) // the owner's only live Plugin on m
	if _, err := m.ClaimWaiting(ctx); err != nil { // the indexer a killed run left resumes now (the Manager would within a second)
		return err
	}
	lead := newLeadModel(cfg.agents, plugin)
	lint, err := d.lintTool(plugin.Owner())
	if err != nil {
		return err
	}
	tools := append(append(d.hostTools(), lint), d.taskTools(plugin.Owner())...)
	conv := []agentloop.Message{{Role: "user", Content: "Research the three storage engines and index the repository."}}

	// The host's loop of runs: a run that ends waiting for tasks is
	// continued when one of them reports something worth a model call
	// (the plugin's OnWake, filtered by the waker).
	for i := 1; ; i++ {
		w.reset() // this run delivers whatever woke the host
		run := fmt.Sprintf("run-%d", i)
		ui.printf("\n== %s ==\n", run)
		ui.runOpen(true)
		res, err := agentloop.Run(ctx, agentloop.Config{
			Model: lead, Tools: tools, Hooks: plugin, RunID: run, AgentID: "lead", OnStep: ui.step,
		}, conv)
		ui.runOpen(false)
		if err != nil {
			return err
		}
		conv = res.Conversation
		ui.printf("%s ended %s (%s) after %d step(s)\n", run, res.Status, res.Reason, res.Steps)
		if res.Status != agentloop.StatusWaiting {
			ui.printf("\nSummary: %s\n", res.Response)
			break
		}
		if err := w.wait(ctx); err != nil {
			return err
		}
	}
	ui.closeBars()
	return ui.taskTree(ctx, m, owner, started)
}

// defaultDB is the demo's database in the user's cache directory, or in
// the temporary directory when there is none.
func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "bgtask", "agentloop.db")
}

// removeDB deletes the SQLite file and its write-ahead log; a file that is
// not there is not an error.
func removeDB(path string) error {
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
