package bgmcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// npmPackage is a copy, in a test's directory, of one of the package
// directories whose locked dependencies npm ci installs.
type npmPackage struct {
	src, dir string
	stderr   []byte // of npm ci
	err      error  // of npm ci
}

// copyNPM copies files of the package directory src into dir/src.
func copyNPM(t *testing.T, dir, src string, files ...string) *npmPackage {
	t.Helper()
	pkg := &npmPackage{src: src, dir: filepath.Join(dir, src)}
	if err := os.Mkdir(pkg.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg.dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pkg
}

// install runs npm ci in the copy. It may run on any goroutine: check
// reports its outcome on the test's.
func (p *npmPackage) install(t *testing.T, npm string) {
	_, p.stderr, p.err = runCommand(t, p.dir, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
}

// check returns the copy's directory once install succeeded. When it
// failed, it skips the test (a machine without the registry), unless
// CI=true, where it fails it.
func (p *npmPackage) check(t *testing.T) string {
	t.Helper()
	if p.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm ci in %s: %v\n%s", p.src, p.err, p.stderr)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(p.stderr)), "\n")
		t.Skipf("npm ci failed (%v: %s): %s suite skipped", p.err, first, p.src)
	}
	return p.dir
}

// installNPM copies files of the package directory src into dir/src and runs
// npm ci there; it returns the copy's directory. Without the registry it
// skips the test, unless CI=true.
func installNPM(t *testing.T, npm, dir, src string, files ...string) string {
	t.Helper()
	pkg := copyNPM(t, dir, src, files...)
	pkg.install(t, npm)
	return pkg.check(t)
}

// goBuild builds the package pkg (a path relative to this module) into
// bin, with the race detector when this test has it (the packages are then
// in the build cache already). It may run on any goroutine.
func goBuild(t *testing.T, pkg, bin string) error {
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if _, stderr, err := runCommand(t, ".", "go", append(args, pkg)...); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, stderr)
	}
	return nil
}

// sideBySide runs each step on a goroutine of its own and returns once all
// have returned: a build, an install and a run mostly wait on different
// things (the linker, the registry, node), so side by side they take the
// time of the longest. A step must not call t.Fatal, t.Skip or t.FailNow.
func sideBySide(steps ...func()) {
	atMost(len(steps), steps...)
}

// atMost is sideBySide with at most n steps running at once.
func atMost(n int, steps ...func()) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, step := range steps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			step()
		})
	}
	wg.Wait()
}
