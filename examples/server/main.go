// Command server is bgtask's reference host: an HTTP server that runs one
// agent turn per request for many conversation threads at once, on a
// durable store, with the model's background work outliving the requests
// that started it.
//
//	go run ./examples/server                       # SQLite file, scripted model, 127.0.0.1:8080
//	go run ./examples/server -pg postgres://...    # PostgreSQL instead
//	OPENAI_API_KEY=... go run ./examples/server -model gpt-5-mini   # a real model
//
// Endpoints (thread ids: 1 to 64 letters, digits, '.', '_' or '-'):
//
//	POST /threads/{id}/messages  {"text": "..."}  one turn: the reply, the tool calls and the events the model was handed
//	GET  /threads/{id}/tasks                      the thread's tasks, and whether something arrived since its last turn
//	POST /threads/{id}/stop[?reason=...]          stop the thread's running turn and cancel the tasks it started, with the reason the model reads
//	POST /threads/{id}/tasks/{task}/messages {"text": "...", "in_reply_to": "input_..."}  a message to a task (a research takes it as a note), or the answer to its question
//
// Without an API key the model is a scripted one served on a loopback
// port: "research TOPIC [in N steps] [asking QUESTION]" starts a background research task
// (each step is a call to the model, a few seconds apart, reported as
// progress), "lookup QUERY" looks something up in the foreground (it goes
// on in the background if it takes longer than -foreground), "list", "get ID", "wait ID" and "cancel NAME" call bgtask's
// task tools, and commands joined with ";" are called in one step.
//
// Threads beyond -max-threads evict the least recently used idle one (its
// Plugin closed, its tasks going on), and so does a thread unused for
// -idle-timeout; after a restart each thread with ends it never heard is
// logged as a wake at start; SIGTERM stops within -stop-grace,
// interrupting the tasks still running.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/bgtask/bgtask/store"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/examples/server/internal/scripted"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// config is what the flags choose.
type config struct {
	addr        string        // where to listen
	db          string        // SQLite file (when pg is empty)
	pg          string        // PostgreSQL DSN
	pgBeat      time.Duration // PostgreSQL: the instance's heartbeat interval
	pgGrace     time.Duration // PostgreSQL: how long a silent instance lives before it is declared dead
	instance    string        // runtime instance id, stable across restarts
	baseURL     string        // OpenAI-compatible endpoint; "" serves the scripted model
	apiKey      string        // its key
	model       string        // the model name
	fakeStep    time.Duration // the scripted model's time per research step
	foreground  time.Duration // how long lookup waits before it goes on in the background
	stopGrace   time.Duration // how long a stop lets turns and tasks end before it interrupts them
	maxThreads  int           // live threads at most
	idleTimeout time.Duration // a thread unused that long is evicted; negative: never
	maxBody     int64         // bytes of a request body at most
	maxText     int           // bytes of a user message at most
	maxSteps    int           // model calls per turn at most
	maxHistory  int           // messages kept per thread at most
}

func main() {
	os.Exit(serverMain(os.Args[1:], os.Stderr))
}

// serverMain parses args, runs the server until SIGINT or SIGTERM, and
// returns the exit status: 0 after a clean stop, 1 on an error, 2 for bad
// flags.
func serverMain(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("server stopped", "err", err)
		return 1
	}
	log.Info("server stopped")
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	host, _ := os.Hostname()
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0: any free port, printed at start)")
	fs.StringVar(&cfg.db, "db", defaultDB(), "SQLite file that keeps the task records")
	fs.StringVar(&cfg.pg, "pg", "", "PostgreSQL DSN: keep the task records there instead of in SQLite")
	fs.DurationVar(&cfg.pgBeat, "pg-heartbeat", pgstore.DefaultHeartbeatInterval, "with -pg: how often the instance stamps its heartbeat (and looks for dead instances)")
	fs.DurationVar(&cfg.pgGrace, "pg-grace", pgstore.DefaultGrace, "with -pg: how long an instance may miss its heartbeat before another declares it dead and interrupts its tasks (at least two heartbeats)")
	fs.StringVar(&cfg.instance, "instance", cmp.Or(host, "server"), "runtime instance id; keep it across restarts so the next start interrupts what this one left running")
	fs.StringVar(&cfg.baseURL, "openai-url", os.Getenv("OPENAI_BASE_URL"), "OpenAI-compatible base URL (default: $OPENAI_BASE_URL; with neither it nor a key, a scripted model on a loopback port)")
	fs.StringVar(&cfg.apiKey, "openai-key", os.Getenv("OPENAI_API_KEY"), "API key (default: $OPENAI_API_KEY)")
	fs.StringVar(&cfg.model, "model", "", "model name (default gpt-5-mini, or scripted for the scripted model)")
	fs.DurationVar(&cfg.fakeStep, "fake-step", 2*time.Second, "the scripted model's time per research step")
	fs.DurationVar(&cfg.foreground, "foreground", 5*time.Second, "how long a lookup runs in the foreground before it goes on in the background")
	fs.DurationVar(&cfg.stopGrace, "stop-grace", 10*time.Second, "on SIGTERM or SIGINT, how long turns and tasks may go on before the tasks still running are interrupted (each thread hears it after the restart)")
	fs.IntVar(&cfg.maxThreads, "max-threads", 1000, "live threads at most; beyond them the least recently used idle thread is evicted (its tasks go on; its next message reopens it), or a new thread is refused (503) when all are busy")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 30*time.Minute, "evict a thread nobody used for that long (its tasks go on; its next message reopens it); 0: never")
	fs.Int64Var(&cfg.maxBody, "max-body", 64<<10, "bytes of a request body at most")
	fs.IntVar(&cfg.maxText, "max-text", 8<<10, "bytes of a user message at most")
	fs.IntVar(&cfg.maxSteps, "max-steps", 8, "model calls per turn at most")
	fs.IntVar(&cfg.maxHistory, "max-history", 200, "messages kept per thread at most (older turns are dropped whole)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var bad error
	switch {
	case fs.NArg() > 0:
		bad = fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.maxThreads < 1, cfg.maxBody < 1, cfg.maxText < 1, cfg.maxSteps < 1, cfg.maxHistory < 1:
		bad = errors.New("every -max-* flag must be at least 1")
	case cfg.fakeStep < 0, cfg.foreground < 0, cfg.stopGrace < 0, cfg.idleTimeout < 0:
		bad = errors.New("-fake-step, -foreground, -stop-grace and -idle-timeout must not be negative")
	case cfg.instance == "":
		bad = errors.New("-instance must not be empty")
	}
	if bad != nil {
		fmt.Fprintln(stderr, "server:", bad)
		fs.Usage()
		return cfg, bad
	}
	if cfg.idleTimeout == 0 {
		cfg.idleTimeout = -1 // agent.ThreadsConfig: negative is never
	}
	return cfg, nil
}

// defaultDB is the server's database in the user's cache directory.
func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "bgtask", "server.db")
}

// taskStore is what the server needs of either durable store.
type taskStore interface {
	store.Store
	Start(ctx context.Context, rt store.Runtime) error
	Close() error
}

// run serves until ctx ends, then stops in order, within cfg.stopGrace:
// the HTTP server (turns in flight finish), the Manager (Stop: running tasks
// may end on their own until the grace is over, then they are interrupted,
// and their threads hear it after the restart), the scripted model, the
// store.
func run(ctx context.Context, cfg config, log *slog.Logger) (err error) {
	var st taskStore
	if cfg.pg != "" {
		st, err = pgstore.Open(ctx, cfg.pg, pgstore.WithLogger(log),
			pgstore.WithHeartbeatInterval(cfg.pgBeat), pgstore.WithGrace(cfg.pgGrace))
	} else {
		if err := os.MkdirAll(filepath.Dir(cfg.db), 0o755); err != nil {
			return err
		}
		st, err = sqlitestore.Open(ctx, cfg.db, sqlitestore.WithLogger(log))
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()

	baseURL, model := cfg.baseURL, cmp.Or(cfg.model, "gpt-5-mini")
	if baseURL == "" && cfg.apiKey == "" {
		stopModel, url, err := serveScripted(cfg.fakeStep, log)
		if err != nil {
			return err
		}
		defer stopModel() // after the Manager's stop: its tasks call the model until they end
		baseURL, model = url, cmp.Or(cfg.model, "scripted")
	}

	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(cfg.instance), bgtask.WithLogger(log),
		bgtask.WithObserver(func(tr bgtask.Transition) {
			log.Info("task", "thread", tr.Task.Owner, "task_id", tr.Task.ID, "name", tr.Task.Name, "from", tr.From, "to", tr.To)
		}),
		bgtask.WithOnPendingOwner(pendingWake(log)))
	if err != nil {
		return err
	}
	defer func() { // after Stop it cuts nothing; on an early return it cancels the tasks
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, m.Shutdown(sctx))
	}()
	if err := st.Start(ctx, m.Runtime()); err != nil {
		return err
	}

	opts := []option.RequestOption{option.WithAPIKey(cmp.Or(cfg.apiKey, "none")), option.WithMaxRetries(1)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	s, err := newServer(m, openai.NewClient(opts...), model, cfg, log)
	if err != nil {
		return err
	}
	defer func() { // after the Manager's Stop: the live threads hear the ends it brings (a wake line each)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, s.threads.Close(cctx))
	}()

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	log.Info("listening", "url", "http://"+ln.Addr().String(), "store", storeName(cfg), "model", model, "model_url", baseURL)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping", "grace", cfg.stopGrace.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.stopGrace)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close() // turns still running: their model calls end, their tasks live on until the Manager stops
	}
	err = errors.Join(err, ignoreClosed(<-served))
	return errors.Join(err, stopManager(sctx, m, log))
}

// stopManager stops m softly: the tasks that run may end until ctx ends,
// then the rest are interrupted. Interrupting them is what the grace is
// for, not an error.
func stopManager(ctx context.Context, m *bgtask.Manager, log *slog.Logger) error {
	err := m.Stop(ctx)
	var se *bgtask.ShutdownError
	if errors.As(err, &se) && errors.Is(err, context.DeadlineExceeded) {
		log.Info("tasks interrupted at the stop", "tasks", se.Interrupted)
		return nil
	}
	return err
}

// pendingWake is the Manager's WithOnPendingOwner callback: after a
// restart, a thread whose tasks ended (or were interrupted) without it
// hearing of it is woken. As between turns (thread.woken), the server runs
// no turn by itself: it logs a wake line, and the thread's next turn
// delivers what it missed.
func pendingWake(log *slog.Logger) func(owner string) {
	return func(owner string) {
		log.Info("wake", "thread", owner, "at_start", true)
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func storeName(cfg config) string {
	if cfg.pg != "" {
		return "postgres"
	}
	return "sqlite:" + cfg.db
}

// serveScripted serves the scripted model on a loopback port, each research
// step taking step; stop closes it.
func serveScripted(step time.Duration, log *slog.Logger) (stop func(), url string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	model := &scripted.Model{Hooks: scripted.Hooks{Research: func(ctx context.Context, _ string, _, _ int) error {
		t := time.NewTimer(step)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}}}
	hs := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("scripted model stopped", "err", err)
		}
	}()
	return func() { hs.Close(); <-done }, "http://" + ln.Addr().String() + "/v1", nil
}
