//go:build race

package bgmcp_test

// raceEnabled says the test binary was built with the race detector.
const raceEnabled = true
