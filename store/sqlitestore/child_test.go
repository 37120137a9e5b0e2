//go:build unix

package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// childConfig is what a child process does.
//
//   - "live" opens the file, runs Tasks tasks of Owner as Instance (each
//     blocks until "release", or until it is cancelled: it then prints
//     "cancelled <id> <cause>"), and prints "ready <ids as JSON>". It then
//     takes commands on stdin: "recover N" (N calls of Recover, then
//     "recovered <interrupted> <shared>"), "release" (the tasks return
//     {"n":i}; "released <records> <events>", the events its Plugin
//     delivered), "exit".
//   - "recoverer" opens the file, calls Recover Recovers times and closes
//     it, Loops times, then prints "recovered <interrupted> <shared>".
//   - "restore" opens the file and runs a Plugin's RunStart for Owner as
//     Instance, then prints "restored <events as JSON>": every event the
//     Plugin delivers.
//
// With Poll set the store is started with that poll interval; every debug
// record the store logs about a cancel request is printed as "log <msg>
// <task>".
type childConfig struct {
	Mode     string        `json:"mode"`
	DB       string        `json:"db"`
	Instance string        `json:"instance"`
	Owner    string        `json:"owner"`
	Tasks    int           `json:"tasks"`
	Loops    int           `json:"loops"`
	Recovers int           `json:"recovers"`
	Poll     time.Duration `json:"poll"`
	Resume   resumeChild   `json:"resume,omitzero"` // mode "resume": resume_crash_test.go
}

// childEvent is an event a child's Plugin delivered.
type childEvent struct {
	Kind string `json:"kind"`
	Task string `json:"task"`
}

// childRecord is a record as a child reports it.
type childRecord struct {
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Attempt int64           `json:"attempt"`
	Result  json.RawMessage `json:"result"`
}

func init() { childMain = runChild }

// runChild is the child's main: it returns the exit status.
func runChild(config string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	out := &lineWriter{w: os.Stdout}
	var err error
	switch cfg.Mode {
	case "live":
		err = childLive(cfg, out)
	case "recoverer":
		err = childRecoverer(cfg, out)
	case "restore":
		err = childRestore(cfg, out)
	case "resume":
		err = childResume(cfg, out)
	default:
		err = fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// lineWriter prints whole lines, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// cancelLog prints the store's records about cancel requests.
type cancelLog struct{ out *lineWriter }

func (cancelLog) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "cancel request") {
		return nil
	}
	task := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "task" {
			task = a.Value.String()
		}
		return true
	})
	h.out.printf("log %s %s", strings.ReplaceAll(r.Message, " ", "_"), task)
	return nil
}
func (h cancelLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelLog) WithGroup(string) slog.Handler      { return h }

func childOpen(ctx context.Context, cfg childConfig, out *lineWriter) (*sqlitestore.Store, error) {
	opts := []sqlitestore.Option{sqlitestore.WithLogger(slog.New(cancelLog{out}))}
	if cfg.Poll > 0 {
		opts = append(opts, sqlitestore.WithPollInterval(cfg.Poll))
	}
	return sqlitestore.Open(ctx, cfg.DB, opts...)
}

func childLive(cfg childConfig, out *lineWriter) error {
	ctx := context.Background()
	st, err := childOpen(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(cfg.Instance))
	if err != nil {
		return err
	}
	defer m.Shutdown(ctx)
	if cfg.Poll > 0 {
		if err := st.Start(ctx, m.Runtime()); err != nil {
			return err
		}
	}
	p, err := agent.NewPlugin(m, cfg.Owner, agent.Config{})
	if err != nil {
		return err
	}
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: "run-" + cfg.Instance}); err != nil {
		return err
	}
	agent := m.Owner(cfg.Owner)
	release := make(chan struct{})
	var ids []string
	for i := range cfg.Tasks {
		id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
			select {
			case <-ctx.Done():
				out.printf("cancelled %s %s", t.ID(), context.Cause(ctx))
				return nil, context.Cause(ctx)
			case <-release:
				return map[string]int{"n": i}, nil
			}
		})
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	line, _ := json.Marshal(ids)
	out.printf("ready %s", line)

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "recover":
			var n int
			fmt.Sscan(arg, &n)
			got, shared, err := recoverLoop(ctx, st, n)
			if err != nil {
				return err
			}
			out.printf("recovered %d %d", got, shared)
		case "release":
			close(release)
			var recs []childRecord
			for _, id := range ids {
				if _, err := agent.Wait(ctx, id); err != nil {
					return err
				}
				stored, err := st.Get(ctx, id) // what the store kept
				if err != nil {
					return err
				}
				recs = append(recs, childRecord{ID: id, Status: string(stored.Status), Attempt: stored.Attempt, Result: stored.Result})
			}
			// Every task's terminal event, as the Plugin hands it out.
			evs, err := deliverAll(ctx, p, len(ids))
			if err != nil {
				return err
			}
			r, _ := json.Marshal(recs)
			e, _ := json.Marshal(evs)
			out.printf("released %s %s", r, e)
		case "exit":
			if err := m.Shutdown(ctx); err != nil {
				return err
			}
			return st.Close()
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	return errors.New("stdin closed before exit")
}

// deliverAll waits for n terminal events from p and returns every event it
// delivered meanwhile.
func deliverAll(ctx context.Context, p *agent.Plugin, n int) ([]childEvent, error) {
	var evs []childEvent
	terminal := 0
	for terminal < n {
		if err := p.WaitEvent(ctx); err != nil {
			return nil, err
		}
		msgs, err := p.Deliver(ctx)
		if err != nil {
			return nil, err
		}
		for _, msg := range msgs {
			if msg.Event == nil {
				continue
			}
			evs = append(evs, childEvent{Kind: string(msg.Event.Kind), Task: msg.Event.TaskID})
			if msg.Event.Kind.IsTerminal() {
				terminal++
			}
		}
	}
	return evs, nil
}

// recoverLoop calls Recover n times and returns how many records it
// interrupted and how many calls found the file shared.
func recoverLoop(ctx context.Context, st *sqlitestore.Store, n int) (int, int, error) {
	var got, shared int
	for range n {
		k, err := st.InterruptOrphaned(ctx)
		switch {
		case errors.Is(err, sqlitestore.ErrShared):
			shared++
		case err != nil:
			return got, shared, err
		}
		got += k
	}
	return got, shared, nil
}

func childRecoverer(cfg childConfig, out *lineWriter) error {
	ctx := context.Background()
	var got, shared int
	for range cfg.Loops {
		st, err := childOpen(ctx, cfg, out)
		if err != nil {
			return err
		}
		k, s, err := recoverLoop(ctx, st, cfg.Recovers)
		got, shared = got+k, shared+s
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	out.printf("recovered %d %d", got, shared)
	return nil
}

func childRestore(cfg childConfig, out *lineWriter) error {
	ctx := context.Background()
	st, err := childOpen(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(cfg.Instance))
	if err != nil {
		return err
	}
	defer m.Shutdown(ctx)
	p, err := agent.NewPlugin(m, cfg.Owner, agent.Config{})
	if err != nil {
		return err
	}
	if err := p.RunStart(ctx, bgtask.RunInfo{RunID: "run-" + cfg.Instance}); err != nil {
		return err
	}
	msgs, err := p.Deliver(ctx)
	if err != nil {
		return err
	}
	evs := []childEvent{}
	for _, msg := range msgs {
		if msg.Event != nil {
			evs = append(evs, childEvent{Kind: string(msg.Event.Kind), Task: msg.Event.TaskID})
		}
	}
	if err := p.RunEnd(ctx, bgtask.RunOutcome{RunID: "run-" + cfg.Instance}); err != nil {
		return err
	}
	if err := m.Shutdown(ctx); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	e, _ := json.Marshal(evs)
	out.printf("restored %s", e)
	return nil
}

// child is a running child process of a test.
type child struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Reader
	out    *os.File
	stderr syncBuffer
	done   bool
}

// syncBuffer is a bytes.Buffer that a child's stderr copier writes while
// the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startChild starts the test binary as a child doing cfg. The test's end
// kills it if it still runs.
func startChild(t testing.TB, name string, cfg childConfig) *child {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, name: name, cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	c.cmd.Stderr = &c.stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = pw
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	c.out, c.lines = pr, bufio.NewReader(pr)
	t.Cleanup(func() {
		if !c.done {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
		pr.Close()
	})
	return c
}

// childPatience bounds every wait for a child's line: only a broken child
// (or a deadlock) reaches it, however loaded the machine is.
const childPatience = 5 * time.Minute

// line returns the child's next line of output, failing the test if the
// child ends first.
func (c *child) line() string {
	c.t.Helper()
	if err := c.out.SetReadDeadline(time.Now().Add(childPatience)); err != nil {
		c.t.Fatal(err)
	}
	l, err := c.lines.ReadString('\n')
	if err != nil {
		c.t.Fatalf("%s: reading its output: %v (read %q; stderr: %s)", c.name, err, l, c.stderr.String())
	}
	return strings.TrimSuffix(l, "\n")
}

// expect returns the rest of the child's next line that starts with verb,
// after a space, ignoring other lines before it (passed to skip).
func (c *child) expect(verb string, skip func(string)) string {
	c.t.Helper()
	for {
		l := c.line()
		if rest, ok := strings.CutPrefix(l, verb+" "); ok {
			return rest
		}
		if skip == nil {
			c.t.Fatalf("%s: line %q, want %s", c.name, l, verb)
		}
		skip(l)
	}
}

// send writes a command line to the child.
func (c *child) send(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		c.t.Fatalf("%s: %s: %v", c.name, cmd, err)
	}
}

// wait waits for the child to exit and fails the test unless it exited 0.
func (c *child) wait() {
	c.t.Helper()
	c.stdin.Close()
	err := c.cmd.Wait()
	c.done = true
	if err != nil {
		c.t.Fatalf("%s: %v (stderr: %s)", c.name, err, c.stderr.String())
	}
}

// unmarshal decodes js into v, failing the test on bad JSON.
func unmarshal(t testing.TB, what, js string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(js), v); err != nil {
		t.Fatalf("%s: %q: %v", what, js, err)
	}
}
