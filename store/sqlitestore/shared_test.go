//go:build unix

package sqlitestore_test

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// Tests of several real processes on one file: a process never
// interrupts, cancels or consumes what a live process holds.

// wantLiveRecords checks that the records ids are running, on their first
// attempt, read as another program would.
func wantLiveRecords(t *testing.T, path string, ids []string) {
	t.Helper()
	db := rawDB(t, path)
	for _, id := range ids {
		var status string
		var attempt int
		if err := db.QueryRowContext(t.Context(), "SELECT status, attempt FROM tasks WHERE id = ?", id).Scan(&status, &attempt); err != nil {
			t.Fatal(err)
		}
		if status != "running" || attempt != 0 {
			t.Errorf("%s of the live process: %s, attempt %d; want running, attempt 0", id, status, attempt)
		}
	}
	db.Close()
}

// wantCompleted releases the live child's tasks ids and checks that each
// completed with its result kept, and that its Plugin told the owner one
// ending of each: completed.
func wantCompleted(t *testing.T, live *child, ids []string) {
	t.Helper()
	live.send("release")
	recsJS, evsJS, _ := strings.Cut(live.expect("released", nil), " ")
	var recs []childRecord
	var evs []childEvent
	unmarshal(t, "records", recsJS, &recs)
	unmarshal(t, "events", evsJS, &evs)
	for i, r := range recs {
		if r.ID != ids[i] || r.Status != "completed" || r.Attempt != 0 || string(r.Result) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("task %d of the live process after its end: %+v, want %s completed, attempt 0, result {\"n\":%d}", i, r, ids[i], i)
		}
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Kind+" "+ev.Task)
	}
	var want []string
	for _, id := range ids {
		want = append(want, "completed "+id)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the live process's owner was told %q, want %q", got, want)
	}
}

// A live process holds running records and calls Recover in a tight loop,
// while other processes open the file, call Recover and close it, in a
// loop too. None of them ever finds itself alone: the other processes'
// every Recover returns ErrShared, and no record is interrupted; the live
// process's tasks then complete with their results kept.
func TestRecoverBesideLiveProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	live := startChild(t, "live", childConfig{Mode: "live", DB: path, Instance: "live-1", Owner: "thread-1", Tasks: 4})
	var ids []string
	unmarshal(t, "ready", live.expect("ready", nil), &ids)

	// One other process: a second would hold the lock shared through most
	// of the first's tries and hide the gap a failed try leaves (with one,
	// the code before the upgrade lock interrupted the live records in 10
	// runs of 10).
	const recoverers, loops, recovers = 1, 60, 500
	var rs []*child
	for i := range recoverers {
		rs = append(rs, startChild(t, fmt.Sprintf("recoverer %d", i), childConfig{Mode: "recoverer", DB: path, Loops: loops, Recovers: recovers}))
	}
	live.send(fmt.Sprintf("recover %d", 2*loops*recovers))
	for _, r := range rs {
		if got, want := r.expect("recovered", nil), fmt.Sprintf("0 %d", loops*recovers); got != want {
			t.Errorf("%s: interrupted, shared = %s; want %s", r.name, got, want)
		}
		r.wait()
	}
	var n, shared int
	fmt.Sscan(live.expect("recovered", nil), &n, &shared)
	if n != 0 {
		t.Errorf("the live process's Recover interrupted %d records, want 0", n)
	}
	t.Logf("the live process's Recover found the file shared %d times of %d", shared, 2*loops*recovers)

	wantLiveRecords(t, path, ids)
	wantCompleted(t, live, ids)
	live.send("exit")
	live.wait()
}

// Process A runs tasks of an owner; process B opens the same file and
// runs a Plugin's RunStart for that owner. B tells the owner nothing and
// leaves A's records running; A's tasks then complete, and the owner is
// told one ending of each.
func TestRestoreBesideLiveProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	a := startChild(t, "process A", childConfig{Mode: "live", DB: path, Instance: "proc-a", Owner: "thread-1", Tasks: 2})
	var ids []string
	unmarshal(t, "ready", a.expect("ready", nil), &ids)

	b := startChild(t, "process B", childConfig{Mode: "restore", DB: path, Instance: "proc-b", Owner: "thread-1"})
	if got := b.expect("restored", nil); got != "[]" {
		t.Errorf("process B's RunStart told the owner %s, want nothing", got)
	}
	b.wait()

	wantLiveRecords(t, path, ids)
	wantCompleted(t, a, ids)
	a.send("exit")
	a.wait()
}

// Two processes on one file each run 8 tasks and carry out cancel
// requests. An operator requests the cancellation of the 8 tasks of the
// first; the second, which polls far more often, leaves them alone; every
// one reaches its task, with its reason. The second's tasks are not
// touched.
func TestCancelRequestsReachTheirProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	// The owner's poll is slow, the other's fast, so that a request the
	// other takes is seen to be lost (the test waits on what the processes
	// report, not on time).
	p1 := startChild(t, "process 1", childConfig{Mode: "live", DB: path, Instance: "proc-1", Owner: "thread-1", Tasks: 8, Poll: 200 * time.Millisecond})
	var ids1 []string
	unmarshal(t, "ready", p1.expect("ready", nil), &ids1)
	p2 := startChild(t, "process 2", childConfig{Mode: "live", DB: path, Instance: "proc-2", Owner: "thread-2", Tasks: 8, Poll: time.Millisecond})
	var ids2 []string
	unmarshal(t, "ready", p2.expect("ready", nil), &ids2)
	lines1, lines2 := p1.stream(), p2.stream()

	ro, err := sqlitestore.OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	want := map[string]string{}
	for i, id := range ids1 {
		reason := fmt.Sprintf("stop-%d", i)
		if _, err := ro.RequestCancel(t.Context(), id, false, reason); err != nil {
			t.Fatal(err)
		}
		want[id] = fmt.Sprintf("%v: %s", bgtask.ErrCanceled, reason)
	}

	// Each request either reaches its task (process 1 reports the cancel)
	// or is carried out by process 2 (its log says so): wait for all 8.
	// Process 2 may expire a request whose task has ended (process 1
	// cancelled it, but has not deleted the request yet): that is not a
	// loss.
	canceled, lost := map[string]string{}, map[string]string{}
	var logs []string // what both processes logged about the requests: said if one goes missing
	for len(canceled)+len(lost) < len(ids1) {
		select {
		case l, ok := <-lines1:
			if !ok {
				t.Fatalf("process 1 ended: %s", p1.stderr.String())
			}
			if strings.HasPrefix(l, "log ") {
				logs = append(logs, "process 1: "+l)
			}
			if rest, ok := strings.CutPrefix(l, "cancelled "); ok {
				id, cause, _ := strings.Cut(rest, " ")
				canceled[id] = cause
			}
		case l, ok := <-lines2:
			if !ok {
				t.Fatalf("process 2 ended: %s", p2.stderr.String())
			}
			f := strings.Fields(l)
			if f[0] == "log" && len(f) == 3 && want[f[2]] != "" {
				logs = append(logs, "process 2: "+l)
			}
			switch {
			case f[0] == "cancelled":
				t.Fatalf("a task of process 2 was cancelled: %s", l)
			case f[0] == "log" && len(f) == 3 && f[1] == "sqlitestore:_cancel_request_handled" && want[f[2]] != "":
				lost[f[2]] = f[1]
			}
		case <-time.After(childPatience):
			t.Fatalf("after %v: %d cancelled, %d lost; cancelled %v; requests left: %s; logs:\n%s", childPatience, len(canceled), len(lost), canceled,
				tableSum(t, path, "cancel_requests"), strings.Join(logs, "\n"))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d cancel requests were carried out by the other process: %v", len(lost), len(ids1), lost)
	}
	for id, cause := range canceled {
		if cause != want[id] {
			t.Errorf("%s cancelled with %q, want %q", id, cause, want[id])
		}
	}

	p1.send("release")
	p2.send("release")
	for _, c := range []struct {
		lines  <-chan string
		name   string
		ids    []string
		status string
	}{{lines1, "process 1", ids1, "cancelled"}, {lines2, "process 2", ids2, "completed"}} {
		recsJS, _, _ := strings.Cut(nextLine(t, c.lines, c.name, "released"), " ")
		var recs []childRecord
		unmarshal(t, "records", recsJS, &recs)
		for i, r := range recs {
			if r.ID != c.ids[i] || r.Status != c.status {
				t.Errorf("%s: task %d: %+v, want %s %s", c.name, i, r, c.ids[i], c.status)
			}
		}
	}
	p1.send("exit")
	p2.send("exit")
	p1.wait()
	p2.wait()
}

// stream reads the child's lines from now on in a goroutine, into the
// channel it returns, which is closed when the child's output ends. The
// test's end kills the child, if it still runs, and waits for the
// goroutine.
func (c *child) stream() <-chan string {
	c.out.SetReadDeadline(time.Time{}) // the wait below is the test's
	ch := make(chan string, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ch)
		sc := bufio.NewScanner(c.lines)
		for sc.Scan() {
			ch <- sc.Text()
		}
	})
	c.t.Cleanup(func() {
		if !c.done {
			c.cmd.Process.Kill()
		}
		for range ch { // let the reader finish
		}
		wg.Wait()
	})
	return ch
}

// nextLine returns the rest of the next line from lines that starts with
// verb, skipping the others.
func nextLine(t *testing.T, lines <-chan string, name, verb string) string {
	t.Helper()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s ended before a %s line", name, verb)
			}
			if rest, ok := strings.CutPrefix(l, verb+" "); ok {
				return rest
			}
		case <-time.After(childPatience):
			t.Fatalf("%s: no %s line after %v", name, verb, childPatience)
		}
	}
}

// A Store knows its own instances alive, and another Store's while that
// Store is open: from its first live record until Close, which removes
// the instance's lock file. An instance never seen, or "", is gone.
func TestInstanceAlive(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s1, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2 := openAt(t, path)
	alive := func(s *sqlitestore.Store, instance string) bool {
		t.Helper()
		ok, err := s.InstanceAlive(t.Context(), instance)
		if err != nil {
			t.Fatalf("InstanceAlive(%q): %v", instance, err)
		}
		return ok
	}
	for _, inst := range []string{"inst-a", "inst-b", ""} {
		if alive(s2, inst) {
			t.Errorf("instance %q alive before any record", inst)
		}
	}
	commit(t, s1, "alice", store.UpsertAction(rec("alice", 1, bgtype.StatusRunning))) // inst-a
	done := rec("alice", 2, bgtype.StatusCompleted)
	done.Instance = "inst-b" // a terminal record does not make its instance alive
	commit(t, s1, "alice", store.UpsertAction(done))
	for _, c := range []struct {
		s    *sqlitestore.Store
		inst string
		want bool
	}{{s1, "inst-a", true}, {s2, "inst-a", true}, {s1, "inst-b", false}, {s2, "inst-b", false}, {s2, "", false}} {
		if got := alive(c.s, c.inst); got != c.want {
			t.Errorf("InstanceAlive(%q) = %v, want %v", c.inst, got, c.want)
		}
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(s2, "inst-a") {
		t.Error("instance alive after its Store closed")
	}
	if left, err := filepath.Glob(path + ".instances/*"); err != nil || len(left) != 0 {
		t.Errorf("instance lock files left after Close: %q, %v", left, err)
	}
	if _, err := s1.InstanceAlive(t.Context(), "inst-a"); !errors.Is(err, sqlitestore.ErrClosed) {
		t.Errorf("InstanceAlive after Close: %v, want ErrClosed", err)
	}
}
