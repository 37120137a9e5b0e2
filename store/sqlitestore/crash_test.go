//go:build unix

package sqlitestore_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// A real process runs tasks on a SQLite file and is killed with SIGKILL
// while some run and some are queued. A fresh Manager on the same file then
// finds every task recorded; Restore interrupts the ones left running or
// queued (status, error, attempt) with one event each, in creation order,
// and the completed ones stay completed.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildHelper(t, dir)
	path := filepath.Join(dir, "tasks.db")
	const owner, instance = "thread-1", "crashed-1"

	cmd := exec.Command(bin, "-db", path, "-owner", owner, "-instance", instance, "-done", "4", "-block", "8", "-limit", "6")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	// Wait for the ready line, with a deadline on the pipe: no sleeping.
	if err := pr.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's ready line: %v (read %q; stderr: %s)", err, line, stderr.String())
	}
	var spawned struct{ Completed, Blocked []string }
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok || json.Unmarshal([]byte(rest), &spawned) != nil || len(spawned.Completed) != 4 || len(spawned.Blocked) != 8 {
		t.Fatalf("ready line %q", line)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	killed = true
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want killed by SIGKILL (stderr: %s)", err, stderr.String())
	}

	st := openAt(t, path, sqlitestore.WithoutRecovery()) // Restore's job here; recovery at open: recover_test.go
	before := map[string]bgtype.TaskMeta{}
	for m, err := range st.List(t.Context(), owner) {
		if err != nil {
			t.Fatal(err)
		}
		before[m.ID] = m
	}
	if len(before) != 12 {
		t.Fatalf("after the crash the store holds %d records, want 12", len(before))
	}
	counts := map[bgtype.Status]int{}
	for _, id := range spawned.Blocked {
		counts[before[id].Status]++
	}
	if counts[bgtype.StatusRunning] != 6 || counts[bgtype.StatusQueued] != 2 {
		t.Fatalf("blocked tasks at the crash: %v, want 6 running and 2 queued", counts)
	}

	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance("after-crash"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(t.Context())
	restored, err := m.Restore(t.Context(), owner)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := m.Inbox(owner)
	if err != nil {
		t.Fatal(err)
	}
	events := ib.Drain()

	wantErr := fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) is gone; it will not be re-run", instance)
	// Then the completions the crashed process never handed to its owner
	// are announced, once, after the interruptions.
	if len(restored) != len(spawned.Blocked) || len(events) != len(spawned.Blocked)+len(spawned.Completed) {
		t.Fatalf("Restore interrupted %d tasks and sent %d events, want %d and %d", len(restored), len(events), len(spawned.Blocked), len(spawned.Blocked)+len(spawned.Completed))
	}
	for i, id := range spawned.Completed {
		if ev := events[len(spawned.Blocked)+i]; ev.Kind != bgtype.EventCompleted || ev.TaskID != id {
			t.Errorf("event %d = %+v, want completed %s", len(spawned.Blocked)+i, ev, id)
		}
	}
	for i, id := range spawned.Blocked { // ids are spawned in creation order
		if ev := events[i]; ev.Kind != bgtype.EventInterrupted || ev.TaskID != id || ev.Error != wantErr {
			t.Errorf("event %d = %+v, want interrupted %s %q", i, ev, id, wantErr)
		}
		got := get(t, st, id)
		want := before[id]
		want.Status, want.Error, want.ErrorKind, want.Attempt, want.FinishedAt = bgtype.StatusInterrupted, wantErr, bgtype.KindInterrupted, before[id].Attempt+1, got.FinishedAt
		if got.FinishedAt.IsZero() || !reflect.DeepEqual(got, want) {
			t.Errorf("after Restore %s =\n %+v\nwant\n %+v", id, got, want)
		}
		if !reflect.DeepEqual(restored[i], got) {
			t.Errorf("Restore returned %+v for %s, stored %+v", restored[i], id, got)
		}
	}
	for i, id := range spawned.Completed {
		if got := get(t, st, id); !reflect.DeepEqual(got, before[id]) || got.Status != bgtype.StatusCompleted || string(got.Result) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("completed task %s after Restore: %+v", id, got)
		}
	}
	if live := ids(t, st, owner, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput); len(live) != 0 {
		t.Errorf("records still live after Restore: %q", live)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// buildHelper builds internal/crashhelper into dir, with -race when this
// test binary has it, so the compiled packages are reused.
func buildHelper(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "crashhelper")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./internal/crashhelper")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build crashhelper: %v\n%s", err, out)
	}
	return bin
}
