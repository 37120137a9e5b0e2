package pgstore_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask/internal/crashloop"
	"github.com/bgtask/bgtask/internal/testbuild"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// An owner's agent loop, driven through a Plugin in real runtime instances,
// spawns plain tasks and sub-agents (each its own loop on its own inbox,
// with children); each instance is killed with SIGKILL at a seeded moment
// of its loop while its successor runs, and the successor's reaper
// interrupts what it left, its runs starting before or after the reap (in
// a seeded order). Across every instance, each task that ended was handed
// to the model exactly once (but the batch a kill cut between its mark and
// the hand-out), and each is marked announced. A failure names the seed
// (BGTASK_CRASH_LOOP_SEEDS replays it) and the lost and doubled tasks with
// their kind.
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
			dsn := pgtest.NewDSN(t)
			return crashloop.Env{
				Args: []string{"-dsn", dsn},
				Gone: func(t *testing.T, instance string) {
					waitFor(t, "the live instance reaps "+instance, func() bool {
						// Again on every check: a heartbeat sent just before
						// the kill may still land after the first update.
						sqlExec(t, dsn, `UPDATE bgtask_instances SET heartbeat_at = now() - interval '1 day' WHERE id = $1 AND state = 'alive'`, instance)
						// and its runs are free: its process's advisory lock
						// went with its connection, or a reaper declared it dead
						return sqlExec(t, dsn, `SELECT 1 FROM bgtask_tasks WHERE instance = $1 AND status IN ('queued', 'running', 'awaiting_input')`, instance) == 0 &&
							sqlExec(t, dsn, `SELECT 1 FROM bgtask_instances WHERE id = $1 AND state = 'alive' AND `+pgstore.InstanceLockTakenSQL, instance) == 0
					})
				},
				Records: func(t *testing.T, owner string) []bgtype.TaskMeta {
					st, err := pgstore.Open(t.Context(), dsn)
					if err != nil {
						t.Fatal(err)
					}
					defer st.Close()
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

// buildLoopHelper builds internal/loophelper into a test directory.
func buildLoopHelper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loophelper")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if out, err := exec.Command(goBin, testbuild.BuildArgs(bin, "./internal/loophelper")...).CombinedOutput(); err != nil {
		t.Fatalf("go build loophelper: %v\n%s", err, out)
	}
	return bin
}
