package jsoncap

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTruncateText(t *testing.T) {
	t.Parallel()
	a100 := strings.Repeat("a", 100)
	for _, tc := range []struct {
		name, s string
		max     int
		want    string
		cut     bool
	}{
		{"short", "short", 10, "short", false},
		{"exactly the cap", "exactly10!", 10, "exactly10!", false},
		{"long", a100, 40, "aaaaaaaaa…[truncated: 100 bytes total]", true},
		{"rune boundary", strings.Repeat("é", 50), 40, "éééé…[truncated: 100 bytes total]", true},
		{"cap below the marker", a100, 5, "…[truncated: 100 bytes total]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := Text(tc.s, tc.max)
			if got != tc.want || cut != tc.cut {
				t.Fatalf("Text = %q, %v; want %q, %v", got, cut, tc.want, tc.cut)
			}
			if cut && tc.max >= len("…[truncated: 100 bytes total]") && len(got) > tc.max {
				t.Fatalf("%d bytes over a cap of %d", len(got), tc.max)
			}
		})
	}
}

func TestTruncateJSON(t *testing.T) {
	t.Parallel()
	long := `"` + strings.Repeat("a", 100) + `"` // 102 bytes
	for _, tc := range []struct {
		name, raw string
		max       int
		want      string
	}{
		{"fits", `{"a":1}`, 100, `{"a":1}`},
		{"long", long, 80, `{"truncated":true,"original_bytes":102,"preview":"\"` + strings.Repeat("a", 26) + `"}`},
		{"escapes counted", `[` + strings.Repeat(`"<é>",`, 9) + `"<é>"]`, 70, `{"truncated":true,"original_bytes":71,"preview":"[\"<é>\",\"<é>\""}`},
		{"cap below the object", long, 10, `{"truncated":true,"original_bytes":102,"preview":""}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := JSON(json.RawMessage(tc.raw), tc.max)
			if string(got) != tc.want || cut != (tc.raw != tc.want) {
				t.Fatalf("JSON = %s, %v; want %s", got, cut, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
			if cut && tc.max > 60 && len(got) > tc.max {
				t.Fatalf("%d bytes over a cap of %d", len(got), tc.max)
			}
		})
	}
}

// TestCutRunes: the prefix never splits a rune and is "" for a limit of
// zero or below.
func TestCutRunes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s     string
		limit int
		want  string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"aé", 2, "a"},
		{"éé", 3, "é"},
		{"", 0, ""},
		{"a", 0, ""},
		{"a", -1, ""},
	} {
		if got := CutRunes(c.s, c.limit); got != c.want {
			t.Errorf("CutRunes(%q, %d) = %q; want %q", c.s, c.limit, got, c.want)
		}
	}
}
