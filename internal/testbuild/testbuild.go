// Package testbuild gives the go command's arguments for the programs that
// tests build and run (helpers, servers, demos), shared by the tests of every
// module of the repository: a helper is built with -race when the test
// binary has it, as under test.sh, so its build finds every package the tests
// compiled in the build cache instead of compiling all of them (the standard
// library included) a second time without the race detector.
package testbuild

import "runtime/debug"

// Race reports whether the running binary was built with -race (read from
// its build information; false when it has none). Safe for concurrent use.
func Race() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// BuildArgs returns the arguments of `go build -o out pkg`, with -race when
// Race reports true. Safe for concurrent use.
func BuildArgs(out, pkg string) []string {
	args := []string{"build", "-o", out}
	if Race() {
		args = append(args, "-race")
	}
	return append(args, pkg)
}
