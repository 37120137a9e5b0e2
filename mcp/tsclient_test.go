package bgmcp_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tsScenarios are the scenarios tsclient/suite.mjs reports, in its order.
var tsScenarios = []string{
	"initialize", "list_tools", "plain_tool", "task_poll", "task_result", "list_pages", "cancel",
	"bad_arguments", "progress", "other_session", "restart", "http_sessions", "large_result", "elicitation",
	"client_errors",
}

// tsHangGuard bounds each external command (npm ci, the suite): a guard
// against a hang, never a measure; the suite itself waits on conditions.
const tsHangGuard = 10 * time.Minute

// TestTypeScriptClient drives the server with the official TypeScript SDK
// client: it builds the tsserver command, installs tsclient's locked
// dependencies with npm ci into a copy of tsclient in a temporary
// directory (the checkout is left untouched), and runs suite.mjs, whose
// scenario lines become subtests. Without node or npm, or when npm ci
// fails (no registry), it is skipped with one line, unless CI=true, where
// it fails.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, npm := lookNode(t)
	dir := t.TempDir()

	begin := time.Now()
	bin := filepath.Join(dir, "tsserver")
	client := copyNPM(t, dir, "tsclient", "package.json", "package-lock.json", "suite.mjs")
	var buildErr error
	var built, installed time.Duration
	sideBySide(func() {
		buildErr = goBuild(t, "./internal/tsserver", bin)
		built = time.Since(begin)
	}, func() {
		client.install(t, npm)
		installed = time.Since(begin)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	suite := client.check(t)
	ready := time.Now()
	stdout, stderr, err := runCommand(t, suite, node, "suite.mjs", bin, dir)
	t.Logf("go build %v and npm ci %v side by side, suite %v (total %v)",
		built.Round(time.Millisecond), installed.Round(time.Millisecond),
		time.Since(ready).Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	reported := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		line := sc.Text()
		name, detail, failed := "", "", false
		switch {
		case strings.HasPrefix(line, "ok "):
			name = strings.TrimPrefix(line, "ok ")
		case strings.HasPrefix(line, "FAIL "):
			name, detail, _ = strings.Cut(strings.TrimPrefix(line, "FAIL "), ": ")
			failed = true
		default:
			t.Log(line)
			continue
		}
		if !slices.Contains(tsScenarios, name) || reported[name] {
			t.Errorf("unexpected scenario line %q", line)
			continue
		}
		reported[name] = true
		t.Run(name, func(t *testing.T) {
			if failed {
				t.Error(detail)
			}
		})
	}
	for _, name := range tsScenarios {
		if !reported[name] {
			t.Errorf("scenario %s did not report", name)
		}
	}
	if err != nil {
		t.Errorf("node suite.mjs: %v", err)
	}
	if bytes.Contains(stderr, []byte("DATA RACE")) {
		t.Error("the race detector reported a data race in tsserver (see its stderr below)")
	}
	if t.Failed() {
		t.Logf("stderr of node and the servers:\n%s", stderr)
	}
}

// lookNode finds node and npm, or skips the test (fails it under CI=true).
func lookNode(t *testing.T) (node, npm string) {
	t.Helper()
	for _, name := range []string{"node", "npm"} {
		path, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found, and CI=true expects it: TypeScript client suite cannot run", name)
			}
			t.Skipf("%s not found: TypeScript client suite skipped", name)
		}
		if name == "node" {
			node = path
		} else {
			npm = path
		}
	}
	return node, npm
}

// buildTSServer builds the tsserver command into dir (goBuild).
func buildTSServer(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "tsserver")
	if err := goBuild(t, "./internal/tsserver", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runCommand runs name in dir under the hang guard and returns its output.
func runCommand(t *testing.T, dir, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	return runCommandEnv(t, dir, nil, name, args...)
}

// runCommandEnv is runCommand with env added to the environment.
func runCommandEnv(t *testing.T, dir string, env []string, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), tsHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Servers the suite started inherit its stderr: if it is killed, do not
	// wait for them to close it.
	cmd.WaitDelay = time.Minute
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}
