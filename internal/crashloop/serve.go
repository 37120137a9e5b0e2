package crashloop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// Kinds of task, as the log and the verdict name them.
const (
	KindPlain    = "plain"
	KindSubAgent = "sub-agent"
	KindChild    = "child"
)

// Config is one process's part of the crash test.
type Config struct {
	Manager *bgtask.Manager // on the helper's Store, whose Commit calls Log.Commit
	Log     *Log
	Owner   string    // the owner whose loop this process runs
	Seed    uint64    // seeds what the "model" spawns and how long tasks take
	Plain   int       // plain tasks this process's loop spawns
	Agents  int       // sub-agents this process's loop spawns
	Child   int       // children each sub-agent spawns
	In      io.Reader // the test's commands
	// StopRunStart, if not 0, stops the owner's loop for good right after
	// its StopRunStart-th RunStart (before the run's first step).
	StopRunStart int
}

// maxFinishTurns bounds the runs of a finishing process.
const maxFinishTurns = 50

// Serve runs the owner's agent loop, run after run, until the test tells it
// to finish; it prints "ready" first. Each run is RunStart, steps
// (BeforeInference, then the "model" spawns some of its budget, StepEnd,
// and at the natural end Deliver), and RunEnd; the next run starts when
// the Plugin's OnWake fires, or on the command "wake" (a new request:
// the test sends it when a peer process is gone). A RunStart refused
// because another live process holds the owner's run prints "busy" and
// waits to be woken. Once its budget is spent and nothing is pending it
// prints "idle".
//
// On "finish" it runs until every record of the owner's tree has ended and
// nothing is pending, plus one more run, prints "done" and returns once In
// ends (the test closes it). Errors: a Plugin phase's, returned at once
// (the goroutine reading In is left to the process's exit).
func Serve(ctx context.Context, cfg Config) error {
	w := &worker{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), poke: make(chan struct{}, 1), finish: make(chan struct{})}
	w.plain, w.agents = cfg.Plain, cfg.Agents
	p, err := agent.NewPlugin(cfg.Manager, cfg.Owner, agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: func(bgtype.Event) { w.wake() }}})
	if err != nil {
		return err
	}
	w.p = p
	var wg sync.WaitGroup
	wg.Go(func() { // ends when the test closes In
		sc := bufio.NewScanner(cfg.In)
		finishing := false
		for sc.Scan() {
			switch sc.Text() {
			case "wake":
				w.wake()
			case "finish":
				if !finishing {
					finishing = true
					close(w.finish)
				}
			}
		}
		if !finishing {
			close(w.finish)
		}
	})
	cfg.Log.Say("ready")
	if err := w.loop(ctx); err != nil {
		return err // the process exits: the reader goes with it
	}
	wg.Wait()
	return nil
}

// loop runs the owner's loop until it is done finishing.
func (w *worker) loop(ctx context.Context) error {
	cfg := w.cfg
	idle := false
	finishing := false
	for turn, finishTurns := 0, 0; ; turn++ {
		pending, err := w.turn(ctx, turn)
		if errors.Is(err, bgtask.ErrRunOpen) {
			// The previous process, stopped mid-run, still holds the
			// owner's run (a store that keeps one run per owner across
			// processes): as a host, wait to be woken (its kill, an end).
			cfg.Log.Say("busy")
			<-w.poke
			continue
		}
		if err != nil {
			return err
		}
		spent := w.plain == 0 && w.agents == 0
		if spent && !pending && !idle {
			idle = true
			cfg.Log.Say("idle")
		}
		select {
		case <-w.finish:
			finishing = true
		default:
		}
		if finishing {
			finishTurns++
			ended, err := w.treeEnded(ctx)
			if err != nil {
				return err
			}
			if spent && !pending && ended || finishTurns == maxFinishTurns {
				if _, err := w.turn(ctx, turn+1); err != nil { // what a last restore finds
					return err
				}
				cfg.Log.Say("done %d", finishTurns)
				return nil
			}
			if !pending {
				continue // a record of a gone process: the next run's restore ends it
			}
		}
		switch {
		case !pending && !spent:
			continue // more to spawn
		case finishing:
			<-w.poke // a task of this process ends (OnWake)
		default:
			select {
			case <-w.poke:
			case <-w.finish:
			}
		}
	}
}

// worker is the state of one process's owner loop.
type worker struct {
	cfg           Config
	p             *agent.Plugin
	rng           *rand.Rand // the owner loop's; used by it alone
	plain, agents int        // budget left
	steps         int        // the owner loop's steps so far
	spawned       int        // sub-agents spawned so far
	runStarts     int        // runs started so far
	poke          chan struct{}
	finish        chan struct{}
}

// wake asks for another run.
func (w *worker) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// turn runs one run of the owner's loop and reports whether work is
// pending at its end.
func (w *worker) turn(ctx context.Context, n int) (bool, error) {
	runID := fmt.Sprintf("turn-%d", n)
	if err := w.p.RunStart(ctx, bgtask.RunInfo{RunID: runID}); err != nil {
		return false, fmt.Errorf("RunStart: %w", err)
	}
	w.cfg.Log.write(OwnerLoop, fmt.Sprintf("runstart %s %d", OwnerLoop, n))
	if w.runStarts++; w.runStarts == w.cfg.StopRunStart {
		w.cfg.Log.halt()
	}
	var pending bool
	for acting := 0; ; {
		msgs, err := w.step(ctx, w.p.BeforeInference)
		if err != nil {
			return false, fmt.Errorf("BeforeInference: %w", err)
		}
		_ = msgs
		acted := false
		if acting < 2 {
			acted = w.act(ctx)
		}
		if pending, err = w.p.StepEnd(ctx); err != nil {
			return false, fmt.Errorf("StepEnd: %w", err)
		}
		if acted {
			acting++
			continue
		}
		more, err := w.step(ctx, w.p.Deliver)
		if err != nil {
			return false, fmt.Errorf("Deliver: %w", err)
		}
		if len(more) == 0 {
			break
		}
	}
	// RunEnd marks heard what the last step handed out: logged as step 0.
	if err := w.p.RunEnd(stepContext(ctx, OwnerLoop, 0), outcome(runID)); err != nil {
		return false, fmt.Errorf("RunEnd: %w", err)
	}
	w.cfg.Log.write(OwnerLoop, fmt.Sprintf("runend %s %d", OwnerLoop, n))
	return pending, nil
}

// step runs one hand-out phase of the owner's loop as its next step and
// logs what it handed out.
func (w *worker) step(ctx context.Context, phase func(context.Context) ([]agent.PromptMessage, error)) ([]agent.PromptMessage, error) {
	w.steps++
	return handOut(ctx, w.cfg.Log, OwnerLoop, w.steps, phase)
}

// handOut runs phase as step n of loop and logs a "took" line for each
// terminal event it returns, then the "stepend" line.
func handOut(ctx context.Context, log *Log, loop string, n int, phase func(context.Context) ([]agent.PromptMessage, error)) ([]agent.PromptMessage, error) {
	msgs, err := phase(stepContext(ctx, loop, n))
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, msg := range msgs {
		if ev := msg.Event; ev != nil && ev.Kind.IsTerminal() {
			lines = append(lines, fmt.Sprintf("took %s %d %s %s", loop, n, ev.TaskID, ev.Kind))
		}
	}
	log.write(loop, append(lines, fmt.Sprintf("stepend %s %d", loop, n))...)
	return msgs, nil
}

// act is the "model" of the owner's loop: it spawns some of the budget
// (one to three plain tasks, and now and then a sub-agent) and reports
// whether it spawned anything.
func (w *worker) act(ctx context.Context) bool {
	o := w.p.Owner()
	var lines []string
	for n := min(w.plain, 1+w.rng.IntN(3)); n > 0; n-- {
		id, err := o.Spawn(ctx, plainTask(w.rng))
		if err != nil {
			panic(fmt.Sprintf("crashloop: spawn: %v", err)) // a Store failure: the verdict would mean nothing
		}
		w.plain--
		lines = append(lines, fmt.Sprintf("spawn %s %s %s", OwnerLoop, id, KindPlain))
	}
	if w.agents > 0 && (w.plain == 0 || w.rng.IntN(3) == 0) {
		seed := w.cfg.Seed + uint64(w.spawned)<<32
		w.spawned++
		id, err := o.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
			return subAgent(ctx, w.cfg, t, seed)
		})
		if err != nil {
			panic(fmt.Sprintf("crashloop: spawn agent: %v", err))
		}
		w.agents--
		lines = append(lines, fmt.Sprintf("spawn %s %s %s", OwnerLoop, id, KindSubAgent))
	}
	w.cfg.Log.write(OwnerLoop, lines...)
	return len(lines) > 0
}

// plainTask returns a task that takes up to 20ms, or one time in three
// up to 400ms (so that kills find tasks, sub-agents and children running),
// and fails one time in five. The time only moves where a kill lands.
func plainTask(rng *rand.Rand) bgtask.Func {
	d := time.Duration(rng.IntN(20)) * time.Millisecond
	if rng.IntN(3) == 0 {
		d = time.Duration(50+rng.IntN(350)) * time.Millisecond
	}
	fail := rng.IntN(5) == 0
	return func(ctx context.Context, _ *bgtask.Task) (any, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fail {
			return nil, errors.New("failed on purpose")
		}
		return "ok", nil
	}
}

// subAgent is a sub-agent: its own loop on its own inbox (a Plugin on the
// task's inbox), whose "model" spawns its children in its first two steps,
// then hands out their ends, waiting for them (WaitEvent) until none is
// pending, and returns. One sub-agent in three returns at its first
// natural end instead, leaving its children running: their ends reach its
// closed inbox and go up to the owner's loop (a kill may land between).
func subAgent(ctx context.Context, cfg Config, t *bgtask.Task, seed uint64) (any, error) {
	rng := rand.New(rand.NewPCG(seed, 2))
	leaves := rng.IntN(3) == 0
	loop := t.ID()
	p, err := agent.NewPlugin(cfg.Manager, t.ID(), agent.Config{Receiver: bgtask.ReceiverConfig{Inbox: t.Inbox()}})
	if err != nil {
		return nil, err
	}
	ag, err := t.Agent()
	if err != nil {
		return nil, err
	}
	runID := "run-" + t.ID()
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: runID}); err != nil {
		return nil, err
	}
	defer p.RunEnd(stepContext(context.WithoutCancel(ctx), loop, 0), outcome(runID)) // marks the last step's: logged as step 0
	left := cfg.Child
	for n := 1; ; n++ {
		if _, err := handOut(ctx, cfg.Log, loop, n, p.BeforeInference); err != nil {
			return nil, err
		}
		var lines []string
		for k := min(left, (cfg.Child+1)/2); k > 0; k-- { // half in each of the first two steps
			id, err := ag.Spawn(ctx, plainTask(rng))
			if err != nil {
				return nil, err
			}
			left--
			lines = append(lines, fmt.Sprintf("spawn %s %s %s", loop, id, KindChild))
		}
		cfg.Log.write(loop, lines...)
		pending, err := p.StepEnd(ctx)
		if err != nil {
			return nil, err
		}
		if len(lines) > 0 {
			continue
		}
		n++
		more, err := handOut(ctx, cfg.Log, loop, n, p.Deliver)
		if err != nil {
			return nil, err
		}
		switch {
		case len(more) > 0:
			continue
		case !pending:
			return "answered", nil
		case leaves:
			cfg.Log.write(loop, "left "+loop)
			return "left its children running", nil
		}
		if err := p.WaitEvent(ctx); err != nil {
			return nil, err
		}
	}
}

// treeEnded reports whether every record of the owner's tree (its tasks,
// their tasks, ...) has ended.
func (w *worker) treeEnded(ctx context.Context) (bool, error) {
	recs, err := Tree(ctx, func(ctx context.Context, owner string) ([]bgtype.TaskMeta, error) {
		var out []bgtype.TaskMeta
		for m, err := range w.cfg.Manager.Owner(owner).List(ctx) {
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}, w.cfg.Owner)
	if err != nil {
		return false, err
	}
	for _, m := range recs {
		if !m.Status.IsTerminal() {
			return false, nil
		}
	}
	return true, nil
}

// StoreLister returns Tree's list function for st: every record of an
// owner, read from the store.
func StoreLister(st store.Store) func(context.Context, string) ([]bgtype.TaskMeta, error) {
	return func(ctx context.Context, owner string) ([]bgtype.TaskMeta, error) {
		var out []bgtype.TaskMeta
		for m, err := range st.List(ctx, owner) {
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}
}

// Tree returns every record of owner's tree: owner's records, then, for
// each sub-agent among them, the records it owns, and so on. list reads
// one owner's records.
func Tree(ctx context.Context, list func(context.Context, string) ([]bgtype.TaskMeta, error), owner string) ([]bgtype.TaskMeta, error) {
	var out []bgtype.TaskMeta
	for queue := []string{owner}; len(queue) > 0; queue = queue[1:] {
		recs, err := list(ctx, queue[0])
		if err != nil {
			return nil, err
		}
		for _, m := range recs {
			out = append(out, m)
			if m.Type == bgtype.TypeSubAgent {
				queue = append(queue, m.ID)
			}
		}
	}
	return out, nil
}

// outcome is the RunOutcome that ends the run runID, not cancelled.
func outcome(runID string) bgtask.RunOutcome { return bgtask.RunOutcome{RunID: runID} }
