//go:build !race

package testbuild_test

// raceEnabled is what the race build tag says.
const raceEnabled = false
