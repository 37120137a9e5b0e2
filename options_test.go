package bgtask

import (
	"errors"
	"testing"
	"time"
)

// TestOptionsRejectBadValues: every invalid value makes New fail with an
// error matching ErrInvalidArgument that names the option or field.
func TestOptionsRejectBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"nil store", []Option{WithStore(nil)}, "WithStore: nil store"},
		{"empty instance", []Option{WithInstance("")}, "WithInstance: empty id"},
		{"max concurrent", []Option{WithLimits(Limits{MaxConcurrent: -1})}, "Limits.MaxConcurrent is -1, must not be negative"},
		{"per owner", []Option{WithLimits(Limits{MaxConcurrentPerOwner: -2})}, "Limits.MaxConcurrentPerOwner is -2, must not be negative"},
		{"depth", []Option{WithLimits(Limits{MaxDepth: -3})}, "Limits.MaxDepth is -3, must not be negative"},
		{"children", []Option{WithLimits(Limits{MaxChildren: -4})}, "Limits.MaxChildren is -4, must not be negative"},
		{"result", []Option{WithCaps(Caps{MaxResultBytes: -1})}, "Caps.MaxResultBytes is -1, must not be negative"},
		{"error", []Option{WithCaps(Caps{MaxErrorBytes: -2})}, "Caps.MaxErrorBytes is -2, must not be negative"},
		{"payload", []Option{WithCaps(Caps{MaxPayloadBytes: -3})}, "Caps.MaxPayloadBytes is -3, must not be negative"},
		{"prompt", []Option{WithCaps(Caps{MaxPromptBytes: -4})}, "Caps.MaxPromptBytes is -4, must not be negative"},
		{"message", []Option{WithCaps(Caps{MaxMessageBytes: -5})}, "Caps.MaxMessageBytes is -5, must not be negative"},
		{"tags", []Option{WithCaps(Caps{MaxTags: -6})}, "Caps.MaxTags is -6, must not be negative"},
		{"tag bytes", []Option{WithCaps(Caps{MaxTagBytes: -7})}, "Caps.MaxTagBytes is -7, must not be negative"},
		{"output bytes", []Option{WithCaps(Caps{MaxOutputBytes: -8})}, "Caps.MaxOutputBytes is -8, must not be negative"},
		{"commit attempts", []Option{WithTuning(Tuning{CommitAttempts: -1})}, "Tuning.CommitAttempts is -1, must not be negative"},
		{"kept events total", []Option{WithTuning(Tuning{KeptEventsTotal: -1})}, "Tuning.KeptEventsTotal is -1, must not be negative"},
		{"first bad field wins", []Option{WithCaps(Caps{MaxErrorBytes: -1, MaxTags: -1})}, "Caps.MaxErrorBytes is -1, must not be negative"},
		{"limits before caps", []Option{WithCaps(Caps{MaxResultBytes: -1}), WithLimits(Limits{MaxDepth: -1})}, "Limits.MaxDepth is -1, must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(tc.opts...)
			want := "bgtask: invalid argument: " + tc.want
			if m != nil || !errors.Is(err, ErrInvalidArgument) || err.Error() != want {
				t.Fatalf("New = (%v, %v), want (nil, %q)", m, err, want)
			}
		})
	}
}

// TestOptionsGroups: each group's zero fields take their documented
// defaults, a negative duration or count of Tuning means none, and a later
// option of a group replaces the earlier one whole.
func TestOptionsGroups(t *testing.T) {
	t.Parallel()
	defCaps := Caps{MaxResultBytes: 64 << 10, MaxErrorBytes: 16 << 10, MaxPayloadBytes: 16 << 10,
		MaxPromptBytes: 4 << 10, MaxMessageBytes: 16 << 10, MaxTags: 16, MaxTagBytes: 64, MaxOutputBytes: 64 << 10}
	defTuning := Tuning{CommitAttempts: 3, CommitBackoff: 50 * time.Millisecond, ProgressInterval: time.Second, CanceledRunsKept: 4096, KeptEventsTotal: 100_000}
	for _, tc := range []struct {
		name       string
		opts       []Option
		wantLimits Limits
		wantCaps   Caps
		wantTuning Tuning
	}{
		{"no option", nil, Limits{}, defCaps, defTuning},
		{"zero groups", []Option{WithLimits(Limits{}), WithCaps(Caps{}), WithTuning(Tuning{})}, Limits{}, defCaps, defTuning},
		{
			"every field set",
			[]Option{
				WithLimits(Limits{MaxConcurrent: 1, MaxConcurrentPerOwner: 2, QueueWhenFull: true, MaxDepth: 3, MaxChildren: 4}),
				WithCaps(Caps{MaxResultBytes: 1, MaxErrorBytes: 2, MaxPayloadBytes: 3, MaxPromptBytes: 4, MaxMessageBytes: 5, MaxTags: 6, MaxTagBytes: 7, MaxOutputBytes: 8}),
				WithTuning(Tuning{CommitAttempts: 1, CommitBackoff: time.Minute, ProgressInterval: time.Hour, CanceledRunsKept: 9, KeptEventsTotal: 5}),
			},
			Limits{MaxConcurrent: 1, MaxConcurrentPerOwner: 2, QueueWhenFull: true, MaxDepth: 3, MaxChildren: 4},
			Caps{MaxResultBytes: 1, MaxErrorBytes: 2, MaxPayloadBytes: 3, MaxPromptBytes: 4, MaxMessageBytes: 5, MaxTags: 6, MaxTagBytes: 7, MaxOutputBytes: 8},
			Tuning{CommitAttempts: 1, CommitBackoff: time.Minute, ProgressInterval: time.Hour, CanceledRunsKept: 9, KeptEventsTotal: 5},
		},
		{
			"some fields set",
			[]Option{WithCaps(Caps{MaxPayloadBytes: 1, MaxTags: 2}), WithTuning(Tuning{ProgressInterval: time.Hour})},
			Limits{},
			Caps{MaxResultBytes: 64 << 10, MaxErrorBytes: 16 << 10, MaxPayloadBytes: 1, MaxPromptBytes: 4 << 10, MaxMessageBytes: 16 << 10, MaxTags: 2, MaxTagBytes: 64, MaxOutputBytes: 64 << 10},
			Tuning{CommitAttempts: 3, CommitBackoff: 50 * time.Millisecond, ProgressInterval: time.Hour, CanceledRunsKept: 4096, KeptEventsTotal: 100_000},
		},
		{
			"negative tuning means none",
			[]Option{WithTuning(Tuning{CommitBackoff: -1, ProgressInterval: -time.Second, CanceledRunsKept: -5})},
			Limits{}, defCaps,
			Tuning{CommitAttempts: 3, KeptEventsTotal: 100_000},
		},
		{
			"a later group replaces an earlier one whole",
			[]Option{
				WithLimits(Limits{MaxConcurrent: 5, QueueWhenFull: true}), WithLimits(Limits{MaxDepth: 2}),
				WithCaps(Caps{MaxResultBytes: 10}), WithCaps(Caps{MaxPromptBytes: 20}),
				WithTuning(Tuning{CommitAttempts: 7}), WithTuning(Tuning{CanceledRunsKept: 1}),
			},
			Limits{MaxDepth: 2},
			Caps{MaxResultBytes: 64 << 10, MaxErrorBytes: 16 << 10, MaxPayloadBytes: 16 << 10, MaxPromptBytes: 20, MaxMessageBytes: 16 << 10, MaxTags: 16, MaxTagBytes: 64, MaxOutputBytes: 64 << 10},
			Tuning{CommitAttempts: 3, CommitBackoff: 50 * time.Millisecond, ProgressInterval: time.Second, CanceledRunsKept: 1, KeptEventsTotal: 100_000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t, tc.opts...)
			if m.cfg.limits != tc.wantLimits {
				t.Errorf("limits %+v, want %+v", m.cfg.limits, tc.wantLimits)
			}
			if m.cfg.caps != tc.wantCaps {
				t.Errorf("caps %+v, want %+v", m.cfg.caps, tc.wantCaps)
			}
			if m.cfg.tuning != tc.wantTuning {
				t.Errorf("tuning %+v, want %+v", m.cfg.tuning, tc.wantTuning)
			}
		})
	}
}
