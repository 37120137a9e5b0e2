//go:build !race

package sqlitestore_test

const raceEnabled = false
