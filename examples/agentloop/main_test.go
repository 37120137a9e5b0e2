package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
func TestDemoRuns(t *testing.T) {
	bin := buildDemo(t)
	cmd := exec.Command(bin, "-agents", "3", "-speed", "4")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
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
		cmd := exec.Command(bin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || stderr.String() != tc.want {
			t.Errorf("%v: exit %v, stderr %q; want exit 1 and %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}
