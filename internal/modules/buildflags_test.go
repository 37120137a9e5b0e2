package modules_test

import (
	"runtime/debug"
	"testing"
)

// buildFlags are the build flags of the check's go commands: -trimpath (the
// copies and the private module cache live in new directories each run;
// without it no compiled package would be found in the build cache again),
// and -race when this test binary has it, as under test.sh: the check then
// compiles its packages as the tests of every module do, and finds each
// third-party package already in the build cache instead of compiling all of
// them a second time without the race detector.
func buildFlags(t *testing.T) string {
	t.Helper()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return "-trimpath -race"
		}
	}
	return "-trimpath"
}
