package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/internal/testbuild"
	"github.com/bgtask/bgtask/store/sqlitestore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildDemo builds the demo binary, as `go run ./examples/agentloop` would
// (with -race under a race test: testbuild.BuildArgs).
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentloop")
	if out, err := exec.Command("go", testbuild.BuildArgs(bin, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The README's first command: the demo exits 0 and ends with the task
// table, lineage drawn as a tree, one researcher cancelled with the tasks it
// started.
//
// It runs the demo in a synctest bubble: its pauses are fake time, so which
// researcher the lead cancels, and when, never depends on how loaded the
// machine is (a real-time run could see the victim finish before the cancel).
func TestDemoRuns(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		if err := run(context.Background(), config{agents: 3, speed: 1, db: db}, &out); err != nil {
			t.Fatalf("demo: %v\n%s", err, out.String())
		}
	})
	text := out.String()
	_, table, ok := strings.Cut(text, "\nTASK ")
	if !ok {
		t.Fatalf("no task table in the output:\n%s", text)
	}
	rows := strings.Split(strings.TrimSpace(table), "\n")[1:]
	want := []string{
		`^researcher-btree +sub_agent +completed +\S+ +btree: read paper on btree and blog on btree$`,
		`^├─ paper +fetch +completed +\S+ +paper on btree$`,
		`^└─ blog +fetch +completed +\S+ +blog on btree$`,
		`^researcher-lsm +sub_agent +completed `,
		`^├─ paper +fetch +completed `,
		`^└─ blog +fetch +completed `,
		`^researcher-columnar +sub_agent +cancelled +\S+ +bgtask: task cancelled$`,
		`^├─ paper +fetch +cancelled +\S+ +bgtask: parent task cancelled$`,
		`^└─ blog +fetch +cancelled +\S+ +bgtask: parent task cancelled$`,
		`^indexer +task +completed +\S+ +indexed 120 files$`,
		`^tests +task +completed +2s +tests: 10 packages passed$`,
		`^lint +lint +completed +900ms +lint: 6 packages clean$`, // in the background at the model's choice
	}
	if len(rows) != len(want) {
		t.Fatalf("table has %d rows, want %d:\n%s", len(rows), len(want), table)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(rows[i]) {
			t.Errorf("row %d is %q, want it to match %s", i, rows[i], re)
		}
	}
	for _, line := range []string{
		"model calls cancel_task",
		"run-1 ended waiting (awaiting_tasks)",
		"ended done (natural)",
		"  indexer                      [####################] 100%\n",
		"  researcher-btree/paper       [####################] 100%\n",
		"model says \"Cancelled researcher-columnar and the 2 task(s) it started. Still running: researcher-btree, researcher-lsm, indexer, tests, lint. I'll report when they finish.\"\n",
		// run_tests is slow: promoted after its foreground time, it reports later like any task.
		"    model calls run_tests {}\n",
		"  * tests promoted to the background: run_tests still running after 100ms\n",
		// lint: the model chose the background (run_in_background); it prints to its output.
		"    model calls lint {\"packages\":6,\"run_in_background\":true}\n",
		"  * lint (in the background at the model's choice) wrote 132 bytes of output\n",
		"    <- completed   lint: \"lint: 6 packages clean\"\n",
		"    <- completed   tests: \"tests: 10 packages passed\"\n",
		"model says \"Finished: researcher-",
		"\nSummary: btree: read paper on btree and blog on btree; indexed 120 files; lint: 6 packages clean; lsm: read paper on lsm and blog on lsm; tests: 10 packages passed. Cancelled: 3 task(s).\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

// A task's end is told after the step that caused it, and a sub-agent's
// task is named after the sub-agent, in the end line and in the event.
func TestDemoTellsCancelInOrder(t *testing.T) {
	text := runDemo(t, config{agents: 3, speed: 1, db: filepath.Join(t.TempDir(), "tasks.db")})
	call := strings.Index(text, "    model calls cancel_task ")
	for _, line := range []string{
		"\n  * researcher-columnar cancelled (sub_agent)\n",
		"\n  * researcher-columnar/paper cancelled (fetch)\n",
		"\n  * researcher-columnar/blog cancelled (fetch)\n",
		"\n    <- cancelled   researcher-columnar/paper\n",
		"\n    <- cancelled   researcher-columnar/blog\n",
	} {
		if at := strings.Index(text, line); call < 0 || at < call {
			t.Errorf("%q at %d, the cancel_task call at %d; want it after:\n%s", line, at, call, text)
		}
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	bin := buildDemo(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-agents", "0"}, "agentloop: -agents 0: want 1 to 9\n"},
		{[]string{"-agents", "10"}, "agentloop: -agents 10: want 1 to 9\n"},
		{[]string{"-speed", "0"}, "agentloop: -speed 0: want more than 0\n"},
	} {
		cmd := exec.Command(bin, append(tc.args, "-db", filepath.Join(t.TempDir(), "tasks.db"))...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || stderr.String() != tc.want {
			t.Errorf("%v: exit %v, stderr %q; want exit 1 and %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

// Issue 5: a demo killed while its tasks run leaves them recorded; the next
// start reports them interrupted, one event each, and nothing of the first
// process stays running among the lead's tasks.
func TestDemoRestartAfterKill(t *testing.T) {
	bin := buildDemo(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	first := exec.Command(bin, "-speed", "0.25", "-db", db)
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once the first run has ended waiting: its tasks are running.
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "run-1 ended waiting") {
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if lines.Err() != nil {
		t.Fatal(lines.Err())
	}

	out, err := exec.Command(bin, "-speed", "4", "-db", db).CombinedOutput()
	if err != nil {
		t.Fatalf("second start: %v\n%s", err, out)
	}
	text := string(out)
	_, afterRestart, _ := strings.Cut(text, "\nstep 1: ")
	step1, _, _ := strings.Cut(afterRestart, "\nstep 2")
	// The lead had three researchers (one being cancelled), the indexer,
	// the promoted tests and lint; the researchers' own fetches are
	// reported to the lead too.
	if n := strings.Count(step1, "<- interrupted"); n < 3 || n > 12 {
		t.Fatalf("first step after the restart delivered %d interrupted events, want 3 to 12:\n%s", n, text)
	}
	// The promoted call was a task like any other: interrupted, and told.
	if !strings.Contains(step1, "\n    <- interrupted tests: ") {
		t.Errorf("the promoted tests task is not reported interrupted:\n%s", step1)
	}
	// A sub-agent's task is named after the sub-agent, also after a restart.
	if !strings.Contains(step1, "\n    <- interrupted researcher-btree/paper: ") {
		t.Errorf("the interrupted fetch is not named after its researcher:\n%s", step1)
	}
	// The killed run's tasks that were running are summarized as such.
	if !regexp.MustCompile(`(?m)^last run: 12 tasks: (\d+ completed, )?(\d+ cancelled, )?\d+ interrupted \(killed while running\), 1 to resume from a checkpoint$`).MatchString(text) {
		t.Fatalf("no summary of the killed run:\n%s", text)
	}
	// Nothing of the killed run is still running after the restart.
	second := storedStatuses(t, db)
	if strings.Contains(second, "running") || strings.Contains(second, "queued") {
		t.Fatalf("the killed run's tasks should all have ended:\n%s", second)
	}
	if !strings.Contains(text, "Interrupted by a restart: ") {
		t.Fatalf("summary does not mention the interrupted tasks:\n%s", text)
	}
	// The indexer, a resumable kind, was not interrupted: it resumed from
	// its checkpoint, and the summary says so.
	if strings.Contains(step1, "<- interrupted indexer") ||
		!regexp.MustCompile(`\nSummary: .*indexed 120 files \(resumed on attempt 2 from (the start|file \d+)\)`).MatchString(text) {
		t.Fatalf("the indexer did not resume:\n%s", text)
	}
}

// storedStatuses lists the status of every task the demo's lead and its
// tasks left in the SQLite file db, each after its parent.
func storedStatuses(t *testing.T, db string) string {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := bgtask.New(bgtask.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)
	tasks, err := storedTasks(ctx, m, "thread-lead")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, meta := range tasks {
		out = append(out, meta.Name+":"+string(meta.Status))
	}
	return strings.Join(out, " ")
}

// runDemo runs the demo in a synctest bubble (fake time: which researcher is
// cancelled, and when, never depends on the machine's load) and returns
// its output.
func runDemo(t *testing.T, cfg config) string {
	t.Helper()
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		if err := run(context.Background(), cfg, &out); err != nil {
			t.Fatalf("demo: %v\n%s", err, out.String())
		}
	})
	return out.String()
}

// Piped, the demo prints plain lines (no terminal escape codes) and every
// line about a task names it: progress, transitions and the events the
// model is given.
func TestDemoPlainOutputNamesTasks(t *testing.T) {
	bin := buildDemo(t)
	out, err := exec.Command(bin, "-speed", "8", "-db", filepath.Join(t.TempDir(), "tasks.db")).Output()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	text := string(out)
	if strings.ContainsAny(text, "\x1b\r") {
		t.Fatalf("piped output has escape codes or carriage returns:\n%q", text)
	}
	for _, re := range []string{
		`(?m)^  researcher-btree/paper +\[#{20}\] 100%$`,
		`(?m)^  indexer +\[#{20}\] 100%$`,
		`(?m)^  \* researcher-btree completed \(sub_agent\)$`,
		`(?m)^    <- completed +researcher-btree: "btree: read paper on btree and blog on btree"$`,
		`(?m)^    <- completed +indexer: "indexed 120 files"$`,
		`(?m)^    <- cancelled +researcher-columnar$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output lacks a line matching %s", re)
		}
	}
	if strings.Contains(text, "<- custom") || regexp.MustCompile(`<- \w+ +task_`).MatchString(text) {
		t.Errorf("an event line names a task by id only:\n%s", text)
	}
}

// The model is never called for progress alone: progress is quiet and
// coalesced, and reaches the lead with the next event that wakes it. The
// story takes four runs: start and cancel, lint's end, the researchers'
// answers, the indexer's result.
func TestDemoProgressDoesNotCallModel(t *testing.T) {
	text := runDemo(t, config{agents: 3, speed: 1, db: filepath.Join(t.TempDir(), "tasks.db")})
	calls, progressOnly := 0, 0
	for _, step := range strings.Split(text, "\nstep ")[1:] {
		calls++
		var delivered, progress int
		for _, line := range strings.Split(step, "\n") {
			if strings.HasPrefix(line, "    <- ") {
				delivered++
				if regexp.MustCompile(`progress\b.*\{"done"`).MatchString(line) {
					progress++
				}
			}
		}
		if delivered > 0 && delivered == progress {
			progressOnly++
		}
	}
	if progressOnly != 0 {
		t.Errorf("%d of %d model calls were for progress alone, want 0:\n%s", progressOnly, calls, text)
	}
	if runs := strings.Count(text, "\n== run-"); runs != 4 || calls != 6 {
		t.Errorf("%d runs, %d model calls; want 4 runs, 6 calls:\n%s", runs, calls, text)
	}
	// The lead never says a task it cancelled is still running.
	for _, line := range regexp.MustCompile(`Still running: [^.]*\.`).FindAllString(text, -1) {
		if strings.Contains(line, "researcher-columnar") {
			t.Errorf("the lead says %q after cancelling researcher-columnar", line)
		}
	}
	for _, step := range strings.Split(text, "\nstep ")[1:] {
		if n := strings.Count(step, `<- progress    indexer: {"done":`); n > 1 {
			t.Errorf("a step delivered %d progress events of the indexer, want them coalesced into one:\n%s", n, step)
		}
	}
}

// Each start summarizes the previous run in one line; -reset deletes the
// database first, so nothing earlier is left to summarize.
func TestDemoLastRunAndReset(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	cfg := config{agents: 3, speed: 1, db: db}
	first := runDemo(t, cfg)
	if strings.Contains(first, "last run:") {
		t.Fatalf("first start summarizes a last run:\n%s", first)
	}
	second := runDemo(t, cfg)
	wantHead := "task metadata in " + db + "\nlast run: 12 tasks: 9 completed, 3 cancelled\n\n== run-1 ==\n"
	if !strings.HasPrefix(second, wantHead) {
		t.Fatalf("second start begins\n%s\nwant\n%s", shortHead(second), wantHead)
	}
	if got := strings.Count(second, "last run:"); got != 1 {
		t.Fatalf("%d summary lines, want 1", got)
	}
	cfg.reset = true
	third := runDemo(t, cfg)
	wantHead = "task metadata in " + db + "\n(deleted by -reset: no earlier runs)\n\n== run-1 ==\n"
	if !strings.HasPrefix(third, wantHead) {
		t.Fatalf("start with -reset begins\n%s\nwant\n%s", shortHead(third), wantHead)
	}
	if got := strings.Count(storedStatuses(t, db), ":"); got != 12 {
		t.Fatalf("after -reset the database holds %d tasks, want the 12 of one run", got)
	}
}

func shortHead(s string) string {
	lines := strings.SplitN(s, "\n", 5)
	return strings.Join(lines[:min(4, len(lines))], "\n")
}

// Without -db the database is in the user's cache directory; the demo
// says where, once.
func TestDemoDatabaseInCacheDir(t *testing.T) {
	bin := buildDemo(t)
	home := t.TempDir()
	cmd := exec.Command(bin, "-speed", "8")
	cmd.Env = append(cmd.Environ(), "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	want := filepath.Join(home, "cache", "bgtask", "agentloop.db")
	if got := strings.Count(string(out), "task metadata in "); got != 1 || !strings.HasPrefix(string(out), "task metadata in "+want+"\n") {
		t.Fatalf("output begins %q, want the path %s once", shortHead(string(out)), want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatal(err)
	}
}
