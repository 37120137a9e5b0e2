//go:build unix

package sqlitestore_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/internal/crashloop"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// An owner's agent loop, driven through a Plugin in real processes, spawns
// plain tasks and sub-agents (each its own loop on its own inbox, with
// children); each process is killed with SIGKILL at a seeded moment of its
// loop, after its successor opened the same file and started its own loop
// (two processes share the file during every restart). Across every
// process, each task that ended was handed to the model exactly once (but
// the batch a kill cut between its mark and the hand-out), and each is
// marked announced. A failure names the seed (BGTASK_CRASH_LOOP_SEEDS
// replays it) and the lost and doubled tasks with their kind.
func TestCrashLoopExactlyOnce(t *testing.T) {
	t.Parallel()
	crashloop.Run(t, crashloop.Scenario{
		Helper:  buildLoopHelper(t),
		Seeds:   []uint64{1, 2, 3, 4},
		Kills:   10,
		Plain:   30,
		Agents:  6,
		Child:   5,
		MaxStop: 100,
		Overlap: 12,
		Owner:   "thread-1",
		Env: func(t *testing.T) crashloop.Env {
			path := filepath.Join(t.TempDir(), "tasks.db")
			return crashloop.Env{
				Args: []string{"-db", path},
				Gone: func(*testing.T, string) {}, // its locks died with it
				Records: func(t *testing.T, owner string) []bgtype.TaskMeta {
					st := openAt(t, path, sqlitestore.WithoutRecovery())
					recs, err := crashloop.Tree(t.Context(), crashloop.StoreLister(st), owner)
					if err != nil {
						t.Fatal(err)
					}
					return recs
				},
			}
		},
	})
}

// buildLoopHelper builds internal/loophelper into a test directory, with
// -race when this test binary has it, so the compiled packages are reused.
func buildLoopHelper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loophelper")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "./internal/loophelper")...).CombinedOutput(); err != nil {
		t.Fatalf("go build loophelper: %v\n%s", err, out)
	}
	return bin
}
