package main

import "runtime/debug"

// buildArgs are the arguments of `go build -o out pkg` for a program a test
// runs: with -race when this test binary has it, as under test.sh, so the
// build finds every package compiled by the tests in the build cache
// instead of compiling all of them (the standard library included) a
// second time without the race detector.
func buildArgs(out, pkg string) []string {
	args := []string{"build", "-o", out}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	return append(args, pkg)
}
