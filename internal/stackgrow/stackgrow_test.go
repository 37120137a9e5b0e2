package stackgrow

import "testing"

// TestGrowStaysOnTheStack: Grow's 1 KiB frame is a stack frame, not a
// heap allocation (which would make it useless and cost a spawn an
// allocation).
func TestGrowStaysOnTheStack(t *testing.T) {
	if n := testing.AllocsPerRun(100, Grow); n != 0 {
		t.Fatalf("Grow allocates %v times, want 0", n)
	}
}
