package modules_test

import "github.com/bgtask/bgtask/internal/testbuild"

// buildFlags are the build flags of the check's go commands: -trimpath (the
// copies and the private module cache live in new directories each run;
// without it no compiled package would be found in the build cache again),
// and -race when this test binary has it, as under test.sh: the check then
// compiles its packages as the tests of every module do, and finds each
// third-party package already in the build cache instead of compiling all of
// them a second time without the race detector.
func buildFlags() string {
	if testbuild.Race() {
		return "-trimpath -race"
	}
	return "-trimpath"
}
