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

// TestMicroIsTruncate: micro is t.UTC().Truncate(time.Microsecond), equal
// by == (the same wall, ext and location fields), at whole seconds, whole
// microseconds and the nanoseconds around them, and on clock readings.
func TestMicroIsTruncate(t *testing.T) {
	t.Parallel()
	base := time.Now()
	for _, ns := range []int{0, 1, 999, 1000, 1001, 999_999_999, 123_456_789} {
		x := time.Date(base.Year(), base.Month(), base.Day(), 12, 0, 0, ns, time.Local)
		want := x.UTC().Truncate(time.Microsecond)
		got := micro(x)
		if got != want {
			t.Fatalf("%d ns: got %#v, want %#v", ns, got, want)
		}
	}
	for range 1000 {
		x := time.Now()
		if got, want := micro(x), x.UTC().Truncate(time.Microsecond); got != want {
			t.Fatalf("got %#v, want %#v", got, want)
		}
	}
}
