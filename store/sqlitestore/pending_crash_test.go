//go:build unix

package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// runAndKill runs the crash helper with args, waits for its ready line and
// kills it with SIGKILL.
func runAndKill(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
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
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	// A hang guard on the pipe, not a timing: the line comes when it comes.
	if err := pr.SetReadDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("reading the helper's ready line: %v (read %q; stderr: %s)", err, line, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want killed by SIGKILL (stderr: %s)", cmd.ProcessState, stderr.String())
	}
}

// pendingCalls makes a Manager on st with WithOnPendingOwner, shuts it
// down (which waits for the callback's goroutine) and returns the owners
// the callback was called with, in call order.
func pendingCalls(t *testing.T, st store.Store) []string {
	t.Helper()
	calls := make(chan string, 64)
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithOnPendingOwner(func(owner string) { calls <- owner }))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(calls)
	var got []string
	for o := range calls {
		got = append(got, o)
	}
	return got
}

// A real process is killed with SIGKILL while thread-1's tasks run (and
// after two of them completed, never taken by a loop); thread-quiet's end
// was taken and thread-hushed's task was silent. After the restart (the
// store recovers at open) WithOnPendingOwner is called exactly once, for
// thread-1; once thread-1's loop took its news, a later start calls it for
// nobody.
func TestCrashPendingOwners(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildHelper(t, dir)
	path := filepath.Join(dir, "tasks.db")
	runAndKill(t, bin, "-db", path, "-owner", "thread-1", "-instance", "crashed-p",
		"-done", "2", "-block", "3", "-limit", "2", "-quiet", "thread-quiet", "-hushed", "thread-hushed")

	st := openAt(t, path) // recovers at open: thread-1's running and queued tasks become interrupted
	if got := pendingCalls(t, st); !slices.Equal(got, []string{"thread-1"}) {
		t.Fatalf("after the crash the callback was called with %q, want thread-1 once", got)
	}

	// thread-1's next run start delivers its news; its loop marks it taken.
	m, err := bgtask.New(bgtask.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(t.Context(), "thread-1"); err != nil {
		t.Fatal(err)
	}
	ib, err := m.Inbox("thread-1")
	if err != nil {
		t.Fatal(err)
	}
	var took []string
	for _, ev := range ib.Drain() {
		took = append(took, ev.TaskID)
	}
	if len(took) != 5 {
		t.Fatalf("thread-1's run start delivered %d events, want 5 (2 completed, 3 interrupted)", len(took))
	}
	if err := m.Owner("thread-1").MarkAnnounced(t.Context(), took...); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := pendingCalls(t, st); len(got) != 0 {
		t.Fatalf("after thread-1 took its news the callback was called with %q, want nobody", got)
	}
}
