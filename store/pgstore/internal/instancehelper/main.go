// Command instancehelper runs one bgtask runtime instance on a pgstore
// Store, for the crash tests: a Manager with -tasks tasks of -owner that
// run until cancelled, then -agents sub-agents of -owner that each start
// -children tasks as an agent, all running until cancelled. It prints
// "task <id>" for each task, "agent <id>" for each sub-agent followed by
// "child <id>" for each of its tasks, then "ready", and then obeys lines
// on stdin:
//
//	cancel <id>   Manager.Cancel; prints "cancelled <n> <error or ok>"
//	list <owner>  prints "meta <json>" for each of the owner's records, then "end"
//	spawn         spawns one more task like the first; prints "spawned <id>" or "spawn failed <error>"
//	load <n> <w>  spawns n tasks of -owner that return at once, w at a time, each
//	              waited for; prints "load <completed> <other ends> <spawn errors> <first problem or ok>"
//	cluster <seconds> <owners> <workers> [<rate>]
//	              for that long, workers goroutines per owner (owners -owner_0,
//	              -owner_1, ...) each spawn a task and wait for it, again and
//	              again: mostly short tasks, one in ten long (100ms), one in ten a
//	              sub-agent that spawns a child and waits for it (with a rate,
//	              rate tasks/s round robin over the owners, started whether the
//	              earlier ones ended or not: an open loop); prints
//	              "cluster <tasks> <children> <not completed> <owners' terminal
//	              notices not exactly one> <commits> <commit p50 µs> <commit p99 µs>
//	              <elapsed ms> <children's notices in the owners' inboxes>
//	              <spawn commit p50 µs> <p99 µs> <completion commit p50 µs> <p99 µs>
//	              <first problem or ok>"
//	keyed <n> <w> spawns tasks of -owner with idempotency keys key-0 … key-<n-1>, w at a time,
//	              waits for those it runs, and prints "keyed <json>": the id each spawn
//	              returned by key, the keys whose function ran here, and spawn errors
//	drain <owner> runs one agent-loop run of owner on a Plugin (RunStart, Deliver,
//	              RunEnd) and prints "took <id>" for each terminal event it hands
//	              out, then "end"
//	resume <n> <steps> <hold at>
//	              spawns n tasks of the kind steps/v1 (-kinds, see kind.go) for
//	              -owner; prints "resumable <id>" for each, then "resumed"
//	release       lets the attempts held by -hold go on (see kind.go)
//	claim         Manager.ClaimWaiting; prints "claimed <n> <error or ok>"
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
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

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
		agents    = flag.Int("agents", 0, "sub-agents to spawn, after the tasks")
		children  = flag.Int("children", 0, "tasks each sub-agent spawns as an agent")
		heartbeat = flag.Duration("heartbeat", 100*time.Millisecond, "heartbeat interval")
		grace     = flag.Duration("grace", time.Hour, "grace period (long: the tests date heartbeats back rather than wait)")
		poll      = flag.Duration("poll", 100*time.Millisecond, "cancel poll interval")
		backoff   = flag.Duration("backoff", 100*time.Millisecond, "listener reconnect backoff (min and max)")
		kinds     = flag.Bool("kinds", false, "register the resumable kind steps/v1 (kind.go)")
		maxRun    = flag.Int("maxrunning", 0, "steps/v1's MaxRunning")
		hold      = flag.Bool("hold", false, "attempts of steps/v1 here hold at their spec's hold_at step until release")
	)
	flag.Parse()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, *dsn, pgstore.WithHeartbeatInterval(*heartbeat), pgstore.WithGrace(*grace),
		pgstore.WithPollInterval(*poll), pgstore.WithReconnectBackoff(*backoff, *backoff))
	if err != nil {
		return err
	}
	defer s.Close()
	ts := &timedStore{Store: s}
	out := new(sync.Mutex) // the kind's lines and the commands' answers, one at a time
	opts := []bgtask.Option{bgtask.WithStore(ts), bgtask.WithInstance(*instance)}
	var kh *kindHost
	var kind *bgtask.Kind[stepsSpec, stepsCursor]
	if *kinds {
		db, err := pgxpool.New(ctx, *dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		kh = &kindHost{db: db, instance: *instance, hold: *hold, release: make(chan struct{}), out: out}
		if kind, err = kh.kind(*maxRun); err != nil {
			return err
		}
		opts = append(opts, bgtask.WithKinds(kind))
	}
	m, err := bgtask.New(opts...)
	if err != nil {
		return err
	}
	if err := s.Start(ctx, m.Runtime()); err != nil {
		return err
	}
	block := func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	for range *tasks {
		id, err := m.Owner(*owner).Spawn(ctx, block)
		if err != nil {
			return err
		}
		fmt.Println("task", id)
	}
	for range *agents {
		kids := make(chan []string, 1)
		id, err := m.Owner(*owner).SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
			ids, err := spawnAll(ctx, t, *children, block)
			kids <- ids
			if err != nil {
				return nil, err
			}
			return block(ctx, t)
		})
		if err != nil {
			return err
		}
		fmt.Println("agent", id)
		ids := <-kids
		if len(ids) != *children {
			return fmt.Errorf("sub-agent %s started %d of its %d tasks", id, len(ids), *children)
		}
		for _, id := range ids {
			fmt.Println("child", id)
		}
	}
	fmt.Println("ready")
	plugins := map[string]*agent.Plugin{}
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
		case "drain":
			if err := drain(ctx, m, plugins, arg); err != nil {
				return err
			}
		case "spawn":
			id, err := m.Owner(*owner).Spawn(ctx, block)
			if err != nil {
				fmt.Println("spawn failed", err)
			} else {
				fmt.Println("spawned", id)
			}
		case "load":
			var n, w int
			if _, err := fmt.Sscan(arg, &n, &w); err != nil {
				return err
			}
			fmt.Println(load(ctx, m.Owner(*owner), n, w))
		case "cluster":
			var (
				secs            float64
				owners, workers int
				rate            float64 // tasks/s offered; 0: closed loop
			)
			if n, err := fmt.Sscan(arg, &secs, &owners, &workers, &rate); n < 3 {
				return err
			}
			fmt.Println(cluster(ctx, m, ts, *owner, time.Duration(secs*float64(time.Second)), owners, workers, rate))
		case "keyed":
			var n, w int
			if _, err := fmt.Sscan(arg, &n, &w); err != nil {
				return err
			}
			fmt.Println("keyed", keyed(ctx, m.Owner(*owner), n, w))
		case "resume":
			var n, steps, holdAt int
			if _, err := fmt.Sscan(arg, &n, &steps, &holdAt); err != nil {
				return err
			}
			if kind == nil {
				return fmt.Errorf("resume without -kinds")
			}
			for range n {
				id, err := kind.Spawn(ctx, m.Owner(*owner), stepsSpec{Steps: steps, HoldAt: holdAt})
				if err != nil {
					return err
				}
				kh.println("resumable", id)
			}
			kh.println("resumed")
		case "release":
			kh.once.Do(func() { close(kh.release) })
		case "claim":
			n, err := m.ClaimWaiting(ctx)
			res := "ok"
			if err != nil {
				res = err.Error()
			}
			out.Lock()
			fmt.Println("claimed", n, res)
			out.Unlock()
		case "quit":
			return quit(m, s)
		default:
			fmt.Println("unknown command", cmd)
		}
	}
	return quit(m, s)
}

// spawnAll starts n tasks running fn as sub-agent t's own, and returns
// their ids, up to the first error.
func spawnAll(ctx context.Context, t *bgtask.Task, n int, fn bgtask.Func) ([]string, error) {
	ag, err := t.Agent()
	if err != nil {
		return nil, err
	}
	var ids []string
	for range n {
		id, err := ag.Spawn(ctx, fn)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func quit(m *bgtask.Manager, s *pgstore.Store) error {
	// A hang guard only, as long as the tests' own.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// load spawns n quick tasks, w at a time, waits for each, and reports how
// they ended.
func load(ctx context.Context, o bgtask.Owner, n, w int) string {
	var (
		mu                       sync.Mutex
		next, done, other, spawn int
		problem                  = "ok"
	)
	note := func(msg string) {
		if problem == "ok" {
			problem = msg
		}
	}
	var wg sync.WaitGroup
	for range w {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == n {
					mu.Unlock()
					return
				}
				next++
				i := next
				mu.Unlock()
				id, err := o.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return i, nil })
				if err != nil {
					mu.Lock()
					spawn++
					note("spawn: " + err.Error())
					mu.Unlock()
					continue
				}
				meta, err := o.Wait(ctx, id)
				mu.Lock()
				switch {
				case err != nil:
					other++
					note("wait: " + err.Error())
				case meta.Status == bgtype.StatusCompleted:
					done++
				default:
					other++
					note(fmt.Sprintf("%s ended %s: %s", id, meta.Status, meta.Error))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return fmt.Sprintf("load %d %d %d %s", done, other, spawn, problem)
}

// keyedResult is what the keyed command prints, as JSON.
type keyedResult struct {
	IDs     map[string]string `json:"ids"`     // key -> the id its spawn returned
	Started []string          `json:"started"` // keys whose function ran in this process
	Errors  []string          `json:"errors"`  // spawn errors
}

// keyed spawns one task per key, w at a time, each with its idempotency
// key, then waits for the tasks this process runs, so that every function
// start here is counted.
func keyed(ctx context.Context, o bgtask.Owner, n, w int) string {
	var (
		mu  sync.Mutex
		res = keyedResult{IDs: map[string]string{}, Started: []string{}, Errors: []string{}}
		wg  sync.WaitGroup
	)
	keys := make(chan string, n)
	for i := range n {
		keys <- fmt.Sprintf("key-%d", i)
	}
	close(keys)
	for range w {
		wg.Go(func() {
			for key := range keys {
				id, err := o.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
					mu.Lock()
					res.Started = append(res.Started, key)
					mu.Unlock()
					return key, nil
				}, bgtask.WithIdempotencyKey(key))
				mu.Lock()
				if err != nil {
					res.Errors = append(res.Errors, key+": "+err.Error())
				} else {
					res.IDs[key] = id
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range res.IDs {
		_, _ = o.Wait(ctx, id) // the other process's task too: its end is committed there
	}
	mu.Lock()
	defer mu.Unlock()
	b, _ := json.Marshal(res)
	return string(b)
}

// drain runs one run of owner's agent loop: the Plugin (one per owner, made
// the first time) announces what the owner never took and hands out what
// waits, marking it.
func drain(ctx context.Context, m *bgtask.Manager, plugins map[string]*agent.Plugin, owner string) error {
	p := plugins[owner]
	if p == nil {
		var err error
		if p, err = agent.NewPlugin(m, owner, agent.Config{}); err != nil {
			return err
		}
		plugins[owner] = p
	}
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: "drain"}); err != nil {
		return err
	}
	msgs, err := p.Deliver(ctx)
	if err != nil {
		return err
	}
	for _, msg := range msgs {
		if msg.Event != nil && msg.Event.Kind.IsTerminal() {
			fmt.Println("took", msg.Event.TaskID)
		}
	}
	fmt.Println("end")
	return p.RunEnd(ctx, bgtask.RunOutcome{RunID: "drain"})
}
