package bga2a

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/testbuild"
)

// jsHangGuard bounds each step of the JavaScript suite: a guard against a
// hang, not a measure of speed.
const jsHangGuard = 5 * time.Minute

// TestJavaScriptClient drives the server with the official JavaScript A2A
// client (@a2a-js/sdk, installed by npm ci from jsclient/package-lock.json)
// over HTTP on the loopback address: the test server internal/jsserver runs
// as its own process, and jsclient/suite.mjs prints one line per scenario.
func TestJavaScriptClient(t *testing.T) {
	t.Parallel()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		t.Skip("node or npm is not installed: the JavaScript client suite (a2a/jsclient) did not run")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build the test server for the JavaScript client suite")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*jsHangGuard)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "jsserver")
	if out, err := exec.CommandContext(ctx, goBin, testbuild.BuildArgs(bin, "./internal/jsserver")...).CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/jsserver: %v\n%s", err, out)
	}

	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	install.Dir = "jsclient"
	if out, err := install.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm ci in a2a/jsclient: %v\n%s", err, out)
		}
		t.Skipf("npm ci in a2a/jsclient failed (no registry?): %v", err)
	}

	srv := exec.CommandContext(ctx, bin)
	stdin, err := srv.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = stdin.Close() // the server shuts down at the end of its stdin
		_, _ = io.Copy(io.Discard, stdout)
		if err := srv.Wait(); err != nil {
			t.Errorf("test server: %v", err)
		}
	}
	defer stop()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the test server's URL: %v", err)
	}
	url = strings.TrimSpace(url)

	suite := exec.CommandContext(ctx, node, "suite.mjs", url)
	suite.Dir = "jsclient"
	out, err := suite.CombinedOutput()
	t.Logf("node suite.mjs:\n%s", out)
	if err != nil {
		t.Errorf("node suite.mjs: %v", err)
	}
	want := []string{"ok card", "ok no-credential", "ok send", "ok stream", "ok continue", "ok input-required", "ok cancel",
		"ok cancel-cascade", "ok get", "ok big-result", "ok message-id", "ok cross-owner"}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(got, want) {
		t.Errorf("suite output = %q, want %q", got, want)
	}
	stop()
}
