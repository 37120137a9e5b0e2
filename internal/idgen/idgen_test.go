package idgen

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
		ids[i] = NewTask(time.Now())
	}
	after := time.Now()
	seen := make(map[string]bool, n)
	for i, id := range ids {
		hexPart, ok := strings.CutPrefix(id, TaskPrefix)
		if !ok || len(hexPart) != 32 {
			t.Fatalf("id %q: want %q and 32 hex digits", id, TaskPrefix)
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

// New puts any prefix before the same 32 digits, short ones built on the
// stack and long ones too, and shares the task ids' sequence: ids made one
// after the other sort in that order after their prefix, whichever
// function made them.
func TestNewPrefixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, prefix string
	}{
		{"empty", ""},
		{"input", "input_"},
		{"msg", "msg_"},
		{"inst", "inst_"},
		{"at the stack limit", strings.Repeat("p", maxPrefix)},
		{"past the stack limit", strings.Repeat("q", maxPrefix+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Now()
			before := NewTask(at)
			id := New(tc.prefix, at)
			after := NewTask(at)
			hexPart, ok := strings.CutPrefix(id, tc.prefix)
			if !ok || len(hexPart) != 32 {
				t.Fatalf("id %q: want %q and 32 hex digits", id, tc.prefix)
			}
			u, err := uuid.Parse(hexPart)
			if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
				t.Fatalf("id %q: %v, version %d variant %v; want a UUIDv7", id, err, u.Version(), u.Variant())
			}
			if b, a := before[len(TaskPrefix):], after[len(TaskPrefix):]; !(b < hexPart && hexPart < a) {
				t.Fatalf("digits %s not between %s and %s made before and after", hexPart, b, a)
			}
		})
	}
}

// TestIDAllocs: an id costs one allocation, its string.
func TestIDAllocs(t *testing.T) {
	at := time.Now()
	tests := []struct {
		name string
		f    func()
	}{
		{"task", func() { _ = NewTask(at) }},
		{"short prefix", func() { _ = New("input_", at) }},
	}
	for _, tc := range tests {
		if got := testing.AllocsPerRun(100, tc.f); got != 1 {
			t.Errorf("%s: %v allocations per id, want 1", tc.name, got)
		}
	}
}
