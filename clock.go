package bgtask

import "time"

// firstSet returns a when it is set, else b: stamps are written once.
func firstSet(a, b time.Time) time.Time {
	if !a.IsZero() {
		return a
	}
	return b
}

// now is the time stamped on records: UTC, microsecond precision (what SQL
// stores keep), without the monotonic reading so records compare equal after
// a JSON round trip.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
