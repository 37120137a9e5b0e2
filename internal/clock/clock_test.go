package clock

import (
	"encoding/json"
	"testing"
	"time"
)

// TestNowSurvivesARoundTrip: Now is UTC, whole microseconds, without a
// monotonic reading, so it equals (==, not only Equal) its JSON round trip.
func TestNowSurvivesARoundTrip(t *testing.T) {
	t.Parallel()
	got := Now()
	if got.Location() != time.UTC {
		t.Fatalf("location %v, want UTC", got.Location())
	}
	if got.Nanosecond()%1000 != 0 {
		t.Fatalf("%v has %d ns past the microsecond, want 0", got, got.Nanosecond()%1000)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back time.Time
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != got {
		t.Fatalf("round trip %#v, want %#v", back, got)
	}
}
