package jsoncap

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Text returns s unchanged if it is at most max bytes. Otherwise it
// returns the first bytes of s, cut at a rune boundary, followed by the
// marker "…[truncated: N bytes total]" (N is len(s)), at most max bytes in
// all; when max is too small even for the marker (zero or negative
// included), the marker alone. The bool reports whether s was cut. Text
// allocates only when it cuts.
func Text(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	marker := "…[truncated: " + strconv.Itoa(len(s)) + " bytes total]"
	return CutRunes(s, max-len(marker)) + marker, true
}

// CutRunes returns the longest prefix of s of at most n bytes that does not
// split a rune; "" when n is zero or negative. It allocates nothing (the
// prefix shares s) and inlines at its call sites.
func CutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// JSON returns raw unchanged (the same slice) if it is at most max bytes.
// Otherwise it returns a new JSON object that says so and keeps the start:
//
//	{"truncated":true,"original_bytes":N,"preview":"<the first bytes of raw, as a string>"}
//
// at most max bytes in all; when max is too small even for the object
// around it, the preview is empty. The preview is cut at a rune boundary.
// The bool reports whether raw was replaced. raw need not be valid JSON:
// the preview is a JSON string whatever its bytes.
func JSON(raw json.RawMessage, max int) (json.RawMessage, bool) {
	if len(raw) <= max {
		return raw, false
	}
	head := `{"truncated":true,"original_bytes":` + strconv.Itoa(len(raw)) + `,"preview":`
	budget := max - len(head) - 1 // the closing brace
	n := budget - 2               // the preview's quotes
	for {
		p := quote(CutRunes(string(raw), n))
		if len(p) <= budget || n <= 0 {
			out := make([]byte, 0, len(head)+len(p)+1)
			out = append(append(append(out, head...), p...), '}')
			return out, true
		}
		n -= len(p) - budget // each byte left out shortens the quoted text by at least one byte
	}
}

// quote encodes s as a JSON string, without the HTML escapes of
// json.Marshal, so that a preview of JSON stays readable.
func quote(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
