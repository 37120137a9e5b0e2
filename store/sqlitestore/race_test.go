//go:build race

package sqlitestore_test

// raceEnabled: the test binary was built with -race, so a helper built with
// it too reuses the compiled packages.
const raceEnabled = true
