package bgtask

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// blankOwners are owner ids that name nobody: empty, or only white space,
// ASCII or not.
var blankOwners = []string{"", " ", "\t\n", "\u00a0", "\u2003", "\u00a0\u2003"}

// TestValidOwner pins what counts as blank: Unicode white space, not only
// ASCII.
func TestValidOwner(t *testing.T) {
	for _, blank := range blankOwners {
		if bgtype.ValidOwner(blank) {
			t.Errorf("bgtype.ValidOwner(%q) = true, want false", blank)
		}
	}
	for _, ok := range []string{"a", " a ", "\u00a0x", "thread-1", "\u200b", "\xff"} {
		if !bgtype.ValidOwner(ok) {
			t.Errorf("bgtype.ValidOwner(%q) = false, want true", ok)
		}
	}
}
