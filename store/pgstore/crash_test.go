package pgstore_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/internal/testbuild"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

var (
	helperOnce sync.Once
	helperBin  string
	helperErr  error
)

// buildHelper builds internal/instancehelper once per test binary.
func buildHelper(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bgtask-helper-")
		if err != nil {
			helperErr = err
			return
		}
		helperBin = filepath.Join(dir, "instancehelper")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		out, err := exec.Command(goBin, testbuild.BuildArgs(helperBin, "./internal/instancehelper")...).CombinedOutput()
		if err != nil {
			helperErr = fmt.Errorf("go build ./internal/instancehelper: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperBin
}

func removeHelper() {
	if helperBin != "" {
		os.RemoveAll(filepath.Dir(helperBin))
	}
}

// instance is a running instancehelper process.
type instance struct {
	t     testing.TB
	id    string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	tasks []string
	// agents are the sub-agents it started (-agents), and children the
	// tasks they started, in order.
	agents, children []string
}

// startInstance runs the helper as runtime instance id with n tasks of
// owner, and waits until it is ready. It is killed at the end of the test
// if it still runs.
func startInstance(t testing.TB, dsn, id, owner string, n int, extra ...string) *instance {
	t.Helper()
	args := append([]string{"-dsn", dsn, "-instance", id, "-owner", owner, "-tasks", fmt.Sprint(n)}, extra...)
	cmd := exec.Command(buildHelper(t), args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &instance{t: t, id: id, cmd: cmd, in: in, lines: make(chan string, 64)}
	go func() { // ends when the process's stdout closes
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(p.kill)
	for {
		line := p.next()
		if line == "ready" {
			break
		}
		kind, id, _ := strings.Cut(line, " ")
		switch kind {
		case "task":
			p.tasks = append(p.tasks, id)
		case "agent":
			p.agents = append(p.agents, id)
		case "child":
			p.children = append(p.children, id)
		default:
			t.Fatalf("%s: unexpected %q", p.id, line)
		}
	}
	return p
}

// next returns the process's next output line, failing after hangGuard.
func (p *instance) next() string {
	p.t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%s exited: %v", p.id, p.cmd.Wait())
		}
		return line
	case <-timer.C:
		p.t.Fatalf("%s: no output within %v", p.id, hangGuard)
	}
	return ""
}

func (p *instance) send(cmd string) {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		p.t.Fatalf("%s: %v", p.id, err)
	}
}

// kill sends SIGKILL, waits for the process and drains its output.
func (p *instance) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	for range p.lines {
	}
	p.cmd.Wait()
}

// quit asks for a clean shutdown and waits for it.
func (p *instance) quit() {
	p.t.Helper()
	p.send("quit")
	if line := p.next(); line != "bye" {
		p.t.Fatalf("%s: quit answered %q", p.id, line)
	}
	for range p.lines {
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("%s: %v", p.id, err)
	}
}

// Two instance processes: one is killed with SIGKILL, the other reaps its
// tasks once the killed one's heartbeat is older than the grace; the owner
// gets exactly one EventInterrupted per task; a fresh process finds every
// task recorded, none left running. The grace is an hour: the test dates
// the killed instance's heartbeat a day back rather than waiting, so a
// slow heartbeat of the live one can never make it look dead.
func TestCrashOtherInstanceReaps(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := startInstance(t, dsn, "inst_crash_a", "alice", 4)
	b := startInstance(t, dsn, "inst_crash_b", "bob", 2)
	statusOf := func(id string) bgtype.Status {
		m, err := s.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return m.Status
	}
	for _, id := range append(slices.Clone(a.tasks), b.tasks...) {
		if st := statusOf(id); st != bgtype.StatusRunning {
			t.Fatalf("%s is %s before the crash", id, st)
		}
	}
	a.kill()
	waitFor(t, "B reaps A's tasks", func() bool {
		// Again on every check: a heartbeat A sent just before it died may
		// still land after the first update.
		sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = 'inst_crash_a' AND state = 'alive'`)
		for _, id := range a.tasks {
			if statusOf(id) != bgtype.StatusInterrupted {
				return false
			}
		}
		return true
	})
	for _, id := range a.tasks {
		m, _ := s.Get(t.Context(), id)
		if m.Attempt != 1 || !strings.Contains(m.Error, `the runtime that ran it (instance "inst_crash_a") is gone`) || m.FinishedAt.IsZero() {
			t.Fatalf("reaped record %+v", m)
		}
	}
	for _, id := range b.tasks {
		if st := statusOf(id); st != bgtype.StatusRunning {
			t.Fatalf("B's task %s is %s, want running", id, st)
		}
	}
	evs, err := s.TakeNotices(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Kind != bgtype.EventInterrupted || !strings.Contains(ev.Error, "inst_crash_a") {
			t.Fatalf("notice %+v", ev)
		}
		got = append(got, ev.TaskID)
	}
	if !slices.Equal(got, a.tasks) { // spawn order is creation order
		t.Fatalf("notices for %v, want one each for %v in order", got, a.tasks)
	}
	if evs, err := s.TakeNotices(t.Context(), "alice"); err != nil || len(evs) != 0 {
		t.Fatalf("second TakeNotices = %v, %v", evs, err)
	}
	if evs, err := s.TakeNotices(t.Context(), "bob"); err != nil || len(evs) != 0 {
		t.Fatalf("bob's notices = %v, %v; want none", evs, err)
	}

	// A fresh process finds every spawned task recorded, none running.
	c := startInstance(t, dsn, "inst_crash_c", "carol", 0)
	c.send("list alice")
	var seen []string
	for line := c.next(); line != "end"; line = c.next() {
		raw, ok := strings.CutPrefix(line, "meta ")
		if !ok {
			t.Fatalf("list: %q", line)
		}
		var m bgtype.TaskMeta
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		if m.Status != bgtype.StatusInterrupted {
			t.Fatalf("fresh process sees %s %s", m.ID, m.Status)
		}
		seen = append(seen, m.ID)
	}
	if !slices.Equal(seen, a.tasks) {
		t.Fatalf("fresh process lists %v, want %v", seen, a.tasks)
	}
	c.quit()
	b.quit()
	for _, id := range b.tasks {
		if st := statusOf(id); st != bgtype.StatusCanceled {
			t.Fatalf("B's task %s after B's shutdown: %s", id, st)
		}
	}
}

// A cancel sent from instance B (Manager.Cancel there) stops a task that
// runs in process A, through NOTIFY, and through the poller while A's
// listening connection is down.
func TestCrashCancelAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, killListener := range []bool{false, true} {
		t.Run(fmt.Sprintf("killListener=%v", killListener), func(t *testing.T) {
			dsn := pgtest.NewDSN(t)
			s, err := pgstore.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			poll := "1h" // NOTIFY must do it
			if killListener {
				poll = "100ms"
			}
			a := startInstance(t, dsn, "inst_pa", "alice", 1, "-poll", poll, "-backoff", "1h")
			b := startInstance(t, dsn, "inst_pb", "bob", 0)
			listener := func() int64 {
				return sqlExec(t, dsn, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_pa")
			}
			waitFor(t, "A listens", func() bool { return listener() == 1 })
			if killListener {
				if n := sqlExec(t, dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, pgstore.ListenerAppName+"inst_pa"); n != 1 {
					t.Fatalf("terminated %d listeners", n)
				}
				waitFor(t, "A's listener gone", func() bool { return listener() == 0 })
			}
			id := a.tasks[0]
			b.send("cancel " + id)
			if line := b.next(); line != "cancelled 1 ok" {
				t.Fatalf("B: %q", line)
			}
			waitFor(t, "A's task cancelled", func() bool {
				m, err := s.Get(t.Context(), id)
				return err == nil && m.Status == bgtype.StatusCanceled
			})
			if killListener && listener() != 0 {
				t.Fatal("A's listener came back: the poller was not what delivered the request")
			}
			a.quit()
			b.quit()
		})
	}
}

// An instance stopped (SIGSTOP) until another instance declared it dead
// writes nothing once it runs again (SIGCONT): the spawn it was asked for
// while stopped fails with ErrInstanceLost, no record of it appears, and
// its reaped tasks stay interrupted. The stop lasts far less than the
// grace (an hour): the test dates the heartbeat back instead, so what
// refuses the write is the check in the database, not the local clock.
func TestCrashPausedInstanceWritesNothing(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	s, err := pgstore.Open(t.Context(), dsn, pgstore.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := startInstance(t, dsn, "inst_pause", "alice", 2)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A stopped", func() bool { return procState(a.cmd.Process.Pid) == 'T' })
	waitFor(t, "another instance reaps A", func() bool {
		// Again on every check: a heartbeat A sent just before the stop
		// may still land after the first update.
		// Two hours: past the grace, not yet old enough for the clean-up.
		sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '2 hours' WHERE id = 'inst_pause' AND state = 'alive'`)
		if _, err := s.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		return sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE instance = 'inst_pause' AND status = 'interrupted'`) == 2
	})
	a.send("spawn") // read by A when it runs again, maybe before its heartbeat
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	line := a.next()
	if !strings.HasPrefix(line, "spawn failed ") || !strings.Contains(line, bgtask.ErrInstanceLost.Error()) {
		t.Fatalf("A after SIGCONT: %q, want the spawn refused with ErrInstanceLost", line)
	}
	a.quit()
	for _, id := range a.tasks {
		m, err := s.Get(t.Context(), id)
		if err != nil || m.Status != bgtype.StatusInterrupted || m.Attempt != 1 {
			t.Fatalf("A's task after it ran again: %+v, %v; want interrupted by the reaper", m, err)
		}
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks`); n != 2 {
		t.Fatalf("%d task rows, want A's 2 only", n)
	}
	if n := sqlExec(t, dsn, `SELECT 1 FROM bgtask_instances WHERE id = 'inst_pause' AND state = 'dead'`); n != 1 {
		var state string
		sqlScan(t, dsn, `SELECT coalesce((SELECT state FROM bgtask_instances WHERE id = 'inst_pause'), 'missing')`, &state)
		t.Fatalf("A's registration is %s, want dead", state)
	}
}

// procState returns the state letter of process pid (R, S, T, ...).
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
