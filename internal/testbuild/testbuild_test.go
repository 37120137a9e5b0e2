package testbuild_test

import (
	"slices"
	"testing"

	"github.com/bgtask/bgtask/internal/testbuild"
)

// Race reads -race from the test binary's build information: it agrees with
// the race build tag the compiler set.
func TestRace(t *testing.T) {
	if got := testbuild.Race(); got != raceEnabled {
		t.Errorf("Race() = %v, the race build tag says %v", got, raceEnabled)
	}
}

func TestBuildArgs(t *testing.T) {
	want := []string{"build", "-o", "bin/helper"}
	if raceEnabled {
		want = append(want, "-race")
	}
	want = append(want, "./internal/helper")
	if got := testbuild.BuildArgs("bin/helper", "./internal/helper"); !slices.Equal(got, want) {
		t.Errorf("BuildArgs = %q, want %q", got, want)
	}
}
