package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildDemo builds the demo binary, as `go run ./examples/agentloop` would.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentloop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
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
		"index_repo         [####################] 100%",
		"\nSummary: btree: read paper on btree and blog on btree; indexed 120 files; lsm: read paper on lsm and blog on lsm. Cancelled: 3 task(s).\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("output lacks %q", line)
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
	// The lead had three researchers (one being cancelled) and the indexer;
	// the researchers' own fetches are reported to the lead too.
	if n := strings.Count(step1, "<- interrupted"); n < 3 || n > 10 {
		t.Fatalf("first step after the restart delivered %d interrupted events, want 3 to 10:\n%s", n, text)
	}
	earlier := regexp.MustCompile(`from earlier runs of the demo: map\[(.*)\]`).FindStringSubmatch(text)
	if earlier == nil || strings.Contains(earlier[1], "running:") || strings.Contains(earlier[1], "queued:") {
		t.Fatalf("the lead's earlier tasks should all have ended:\n%s", text)
	}
	if !strings.Contains(text, "Interrupted by a restart: ") {
		t.Fatalf("summary does not mention the interrupted tasks:\n%s", text)
	}
}
