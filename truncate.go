package bgtask

import "unicode/utf8"

// truncateText cuts s to at most limit bytes, at a rune boundary, and
// reports whether it cut anything. A limit below 1 keeps nothing of a
// non-empty s.
func truncateText(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := max(0, limit)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}
