package crashloop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// SeedsEnv names the environment variable that replaces a Scenario's
// seeds: a comma-separated list, such as the seed a failure printed.
const SeedsEnv = "BGTASK_CRASH_LOOP_SEEDS"

// Env is one store for one seed.
type Env struct {
	// Args are the helper's flags that name the store (a file, a DSN).
	Args []string
	// Gone returns once the live processes may treat instance, just
	// killed, as gone: at once on SQLite (its locks died with it); on
	// PostgreSQL once a live instance's reaper interrupted its records.
	Gone func(t *testing.T, instance string)
	// Records returns every record of owner's tree, once every helper has
	// exited.
	Records func(t *testing.T, owner string) []bgtype.TaskMeta
}

// Scenario is a crash test of one store.
type Scenario struct {
	Helper  string                 // the helper program (see Serve for what it does)
	Seeds   []uint64               // fixed seeds; SeedsEnv replaces them
	Kills   int                    // processes killed per seed; one more finishes
	Plain   int                    // per process: plain tasks,
	Agents  int                    // sub-agents,
	Child   int                    // children per sub-agent
	MaxStop int                    // a killed process's owner loop stops after one of its first MaxStop writes, or its first or second RunStart
	Overlap int                    // the successor writes up to Overlap lines before its predecessor is killed
	Owner   string                 // the owner whose loop every process runs
	Env     func(t *testing.T) Env // a fresh store, per seed
}

// hangGuard bounds every wait on a helper. It only turns a hang into a
// failure: no outcome depends on it.
const hangGuard = 3 * time.Minute

// Run runs sc once per seed, each seed a parallel subtest on a fresh store
// (Run returns before they run; its test waits for them): process
// 0 runs the owner's loop; when its loop stops (at its seeded stop point,
// or idle), process 1 starts on the same store and runs its own loop; after
// it wrote a seeded number of lines, process 0 is killed with SIGKILL and
// process 1 is told ("wake") to start a run, before and after the store
// treats process 0 as gone (Env.Gone), in a seeded order; and so on, Kills
// times. The last process then finishes: it runs until every record ended
// and exits. Judge then checks the records against every process's log;
// a failure names the seed, which SeedsEnv replays: the same stop points,
// spawns and orders (where a kill lands among the tasks' own progress
// still varies with the scheduler).
func Run(t *testing.T, sc Scenario) {
	seeds := sc.Seeds
	if s := os.Getenv(SeedsEnv); s != "" {
		seeds = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("%s=%q: %v", SeedsEnv, s, err)
			}
			seeds = append(seeds, n)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Seeds share nothing (a fresh store and directory each), and a
			// seed is mostly waiting on its helpers: side by side they take
			// the time of the longest, not of all.
			t.Parallel()
			v, logs := runSeed(t, sc, seed)
			t.Logf("seed %d: %d kills; %s", seed, sc.Kills, v.Summary())
			if err := v.Err(); err != nil {
				t.Errorf("seed %d (%s=%d replays it), %d kills:\n%v\n%s", seed, SeedsEnv, seed, sc.Kills, err, histories(v, logs))
			}
		})
	}
}

// histories returns the log lines of the first few problem tasks of v, by
// process, for a reader of a failure.
func histories(v Verdict, logs []ProcLog) string {
	var b strings.Builder
	n := 0
	for _, ts := range [][]Task{v.Lost, v.Doubled, v.Unmarked, v.Live, v.Overwritten} {
		for _, t := range ts {
			if n++; n > 4 {
				return b.String()
			}
			fmt.Fprintf(&b, "history of %s, %s at the end", t, t.Status)
			if t.Parent != "" {
				fmt.Fprintf(&b, "; with the lines of its sub-agent %s", t.Parent)
			}
			b.WriteString(":\n")
			for _, pl := range logs {
				for _, line := range pl.Lines {
					if s := Subject(line); s == t.ID || s != "" && s == t.Parent {
						fmt.Fprintf(&b, "  %s: %s\n", pl.Name, line)
					}
				}
			}
		}
	}
	return b.String()
}

func runSeed(t *testing.T, sc Scenario, seed uint64) (Verdict, []ProcLog) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	env := sc.Env(t)
	dir := t.TempDir()
	var procs []*proc
	start := func(k int, stop []string) *proc {
		p := startProc(t, sc, env, dir, k, seed, stop)
		procs = append(procs, p)
		p.waitFor("ready", func() bool { return p.ready })
		return p
	}
	// Where a killed process's loop stops: one time in three right after a
	// RunStart (what a restore hands over waits for the first step), else
	// after a seeded number of writes.
	stopAt := func() []string {
		if rng.IntN(3) == 0 {
			return []string{"-stop-runstart", fmt.Sprint(1 + rng.IntN(2))}
		}
		return []string{"-stop", fmt.Sprint(1 + rng.IntN(sc.MaxStop))}
	}
	cur := start(0, stopAt())
	for k := 1; k <= sc.Kills; k++ {
		prev := cur
		prev.waitFor("its loop stopped or idle", func() bool { return prev.stopped || prev.idle })
		stop := stopAt()
		if k == sc.Kills {
			stop = nil // the last one finishes
		}
		cur = start(k, stop)
		overlap := rng.IntN(sc.Overlap + 1)
		cur.waitFor(fmt.Sprintf("%d lines", overlap), func() bool {
			return cur.logLines >= overlap || cur.stopped || cur.idle || cur.busy
		})
		prev.kill()
		early := rng.IntN(2) == 0
		if early {
			cur.send("wake") // a run before the store treats the dead process as gone
		}
		env.Gone(t, prev.instance)
		cur.send("wake")
	}
	cur.send("finish")
	cur.waitFor("done", func() bool { return cur.done })
	cur.exit()
	logs := make([]ProcLog, len(procs))
	for i, p := range procs {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = ProcLog{Name: p.instance, Lines: strings.Split(strings.TrimSpace(string(b)), "\n"), Killed: p.killed}
	}
	return Judge(sc.Owner, env.Records(t, sc.Owner), logs), logs
}

// proc is a running helper.
type proc struct {
	t        *testing.T
	instance string
	log      string
	cmd      *exec.Cmd
	in       io.WriteCloser
	stderr   *syncBuffer
	read     chan struct{} // closed when stdout is drained (the process exited)
	killed   bool

	mu       sync.Mutex // guards the fields below
	lines    []string
	changed  chan struct{} // gets a value when lines grows
	seen     int           // lines the test looked at; what they said:
	logLines int           // "log" lines
	ready    bool          // "ready": the store is open
	stopped  bool          // "stopped": its owner loop stopped for good
	idle     bool          // "idle": its budget is spent and nothing is pending
	busy     bool          // "busy": a RunStart found the owner's run open in another live process
	done     bool          // "done": it finished
}

func startProc(t *testing.T, sc Scenario, env Env, dir string, k int, seed uint64, stop []string) *proc {
	t.Helper()
	p := &proc{
		// The seed in the id too: seeds run side by side, and PostgreSQL's
		// advisory lock of an instance id is one across the schemas of a
		// database.
		t: t, instance: fmt.Sprintf("inst_%d_%d", seed, k), log: filepath.Join(dir, fmt.Sprintf("p%d.log", k)),
		stderr: &syncBuffer{}, read: make(chan struct{}), changed: make(chan struct{}, 1),
	}
	args := append([]string{
		"-instance", p.instance, "-log", p.log, "-owner", sc.Owner, "-seed", fmt.Sprint(seed*1000 + uint64(k)),
		"-plain", fmt.Sprint(sc.Plain), "-agents", fmt.Sprint(sc.Agents), "-children", fmt.Sprint(sc.Child),
	}, stop...)
	args = append(args, env.Args...)
	p.cmd = exec.Command(sc.Helper, args...)
	p.cmd.Stderr = p.stderr
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // ends at EOF: the process exited; waited for by kill and exit
		defer close(p.read)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.read
			p.cmd.Wait()
		}
	})
	return p
}

// waitFor reads the process's lines until what they said satisfies ok,
// failing after hangGuard or if the process exits first.
func (p *proc) waitFor(what string, ok func() bool) {
	p.t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		p.mu.Lock()
		for !ok() && p.seen < len(p.lines) {
			l := p.lines[p.seen]
			p.seen++
			switch {
			case strings.HasPrefix(l, "log "):
				p.logLines++
			case l == "ready":
				p.ready = true
			case l == "stopped":
				p.stopped = true
			case l == "idle":
				p.idle = true
			case l == "busy":
				p.busy = true
			case strings.HasPrefix(l, "done "):
				p.done = true
			}
		}
		if ok() {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		select {
		case <-p.changed:
		case <-p.read:
			p.mu.Lock()
			more := p.seen < len(p.lines)
			p.mu.Unlock()
			if !more {
				p.t.Fatalf("%s exited before %s: %v\nstderr:\n%s", p.instance, what, p.cmd.Wait(), p.stderr)
			}
		case <-guard.C:
			p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines' stacks, on stderr
			<-p.read
			p.cmd.Wait()
			p.t.Fatalf("%s: not %s within %v\nstderr (the stacks at SIGQUIT):\n%s", p.instance, what, hangGuard, p.stderr)
		}
	}
}

func (p *proc) send(cmd string) {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		p.t.Fatalf("%s: send %q: %v\nstderr:\n%s", p.instance, cmd, err, p.stderr)
	}
}

// kill sends SIGKILL and waits for the process.
func (p *proc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	<-p.read
	err := p.cmd.Wait()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s ended with %v, want killed by SIGKILL\nstderr:\n%s", p.instance, err, p.stderr)
	}
	p.killed = true
}

// exit closes the process's stdin and waits for a clean exit.
func (p *proc) exit() {
	p.t.Helper()
	p.in.Close()
	<-p.read
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("%s: %v\nstderr:\n%s", p.instance, err, p.stderr)
	}
}

type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
