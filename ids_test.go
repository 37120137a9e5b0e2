package bgtask

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Ids are "task_" and a UUIDv7 in hex: the version and variant bits are
// right, the time is now, and ids made one after the other sort in that order.
func TestTaskIDIsSortableUUIDv7(t *testing.T) {
	const n = 10000
	before := time.Now().Truncate(time.Millisecond)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newTaskID(time.Now())
	}
	after := time.Now()
	seen := make(map[string]bool, n)
	for i, id := range ids {
		hexPart, ok := strings.CutPrefix(id, IDPrefix)
		if !ok || len(hexPart) != 32 {
			t.Fatalf("id %q: want %q and 32 hex digits", id, IDPrefix)
		}
		u, err := uuid.Parse(hexPart)
		if err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("id %q: version %d variant %v, want 7 and RFC 4122", id, u.Version(), u.Variant())
		}
		sec, nsec := u.Time().UnixTime()
		if at := time.Unix(sec, nsec); at.Before(before) || at.After(after.Add(time.Second)) {
			t.Fatalf("id %q: time %v not within [%v, %v]", id, at, before, after)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		if i > 0 && ids[i-1] >= id {
			t.Fatalf("ids out of order: %q then %q", ids[i-1], id)
		}
	}
}
