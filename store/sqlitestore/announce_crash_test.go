//go:build unix

package sqlitestore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/store/sqlitestore"
)

// Real processes spawn tasks that end at various times while their loop
// drains and marks at step boundaries, and are killed with SIGKILL at
// seeded random points; each restart recovers what the killed one left
// and announces what it never handed out. Across every run, each task is
// announced exactly once: a "took" line, or a "taking" line cut short by
// the kill whose mark the database holds; and no record is left live.
func TestCrashAnnouncesOnce(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BGTASK_CRASH_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (BGTASK_CRASH_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	bin := filepath.Join(dir, "announcehelper")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "./internal/announcehelper")...).CombinedOutput(); err != nil {
		t.Fatalf("go build announcehelper: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "tasks.db")

	spawned := map[string]bool{}
	delivered := map[string]int{}
	const killedRuns, spawn, block = 4, 8, 2
	for run := range killedRuns + 1 {
		final := run == killedRuns
		runArgs := []string{"-db", path, "-seed", fmt.Sprint(rng.Uint64()), "-spawn", fmt.Sprint(spawn), "-block", fmt.Sprint(block)}
		if final {
			runArgs = []string{"-db", path, "-spawn", "1", "-block", "0", "-exit"}
		}
		cmd := exec.Command(bin, runArgs...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		killAt := 1 + rng.IntN(spawn+block+1+2*spawn) // a line number within the run's work
		var lines []string
		sc := bufio.NewScanner(pr)
		killed := false
		for sc.Scan() { // EOF once the child is gone and the pipe is drained
			lines = append(lines, sc.Text())
			if !final && !killed && len(lines) >= killAt || !final && sc.Text() == "idle" && !killed {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		pr.Close()
		err = cmd.Wait()
		if final && err != nil {
			t.Fatalf("final run: %v (stderr: %s)", err, stderr.String())
		}
		if !final {
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("run %d ended with %v, want killed (stderr: %s)", run, err, stderr.String())
			}
		}
		took := map[string]bool{}
		var taking []string
		for _, l := range lines {
			verb, id, _ := strings.Cut(l, " ")
			switch verb {
			case "spawned":
				spawned[id] = true
			case "took":
				took[id] = true
				delivered[id]++
			case "taking":
				taking = append(taking, id)
			}
		}
		var cut []string // taken but not seen handed out: the kill came between
		for _, id := range taking {
			if !took[id] {
				cut = append(cut, id)
			}
		}
		if len(cut) > 0 {
			db := rawDB(t, path)
			for _, id := range cut {
				var marked int
				if err := db.QueryRowContext(t.Context(), "SELECT announced FROM tasks WHERE id = ?", id).Scan(&marked); err != nil {
					t.Fatal(err)
				}
				if marked == 1 {
					delivered[id]++ // the mark is in: it counts as handed out
				}
			}
			db.Close()
		}
		t.Logf("run %d: %d lines, killed at %d, %d cut", run, len(lines), killAt, len(cut))
	}

	// Every record the runs made (a kill may cut a spawn before its line).
	st := openAt(t, path, sqlitestore.WithoutRecovery())
	stored := map[string]bool{}
	for got, err := range st.List(t.Context(), "thread-1") {
		if err != nil {
			t.Fatal(err)
		}
		stored[got.ID] = true
		if !got.Status.IsTerminal() || !got.Announced {
			t.Errorf("%s after every run: %s, announced %v", got.ID, got.Status, got.Announced)
		}
		if delivered[got.ID] != 1 {
			t.Errorf("%s (%s) announced %d times, want 1", got.ID, got.Status, delivered[got.ID])
		}
	}
	for id := range spawned {
		if !stored[id] {
			t.Errorf("spawned %s is not stored", id)
		}
	}
	if len(stored) < killedRuns+1 {
		t.Errorf("%d tasks stored, want at least %d", len(stored), killedRuns+1)
	}
}
