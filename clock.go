package bgtask

import "time"

// now is the time stamped on records: UTC, microsecond precision (what SQL
// stores keep), without the monotonic reading so records compare equal after
// a JSON round trip.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
