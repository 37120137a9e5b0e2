package bgtask

import (
	"testing"
)

// blankOwners are owner ids that name nobody: empty, or only white space,
// ASCII or not.
var blankOwners = []string{"", " ", "\t\n", "\u00a0", "\u2003", "\u00a0\u2003"}

// TestValidOwner pins what counts as blank: Unicode white space, not only
// ASCII.
func TestValidOwner(t *testing.T) {
	for _, blank := range blankOwners {
		if validOwner(blank) {
			t.Errorf("validOwner(%q) = true, want false", blank)
		}
	}
	for _, ok := range []string{"a", " a ", "\u00a0x", "thread-1", "\u200b", "\xff"} {
		if !validOwner(ok) {
			t.Errorf("validOwner(%q) = false, want true", ok)
		}
	}
}
