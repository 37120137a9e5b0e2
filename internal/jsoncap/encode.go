package jsoncap

import (
	"bytes"
	"encoding/json"
	"math"
	"unicode/utf8"
)

// Encode encodes v for an event or a result, with the bytes json.Marshal
// would give. Values that are already JSON or immutable scalars take a
// fast path without reflection; everything else goes through
// encoding/json, so what cannot be encoded is an error here, in the
// caller's goroutine, and not later in the owner. The result never shares
// v's memory (a json.RawMessage is copied, compacted). Safe for concurrent
// use as far as v is.
func Encode(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return jsonNullValue, nil
	case bool:
		if x {
			return json.RawMessage("true"), nil
		}
		return json.RawMessage("false"), nil
	case int:
		return formatInt(int64(x)), nil
	case int64:
		return formatInt(x), nil
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) && x == math.Trunc(x) && math.Abs(x) < 1e15 && !math.Signbit(x) {
			return formatInt(int64(x)), nil
		}
	case string:
		if plainASCII(x) {
			b := make([]byte, 0, len(x)+2)
			b = append(b, '"')
			b = append(b, x...)
			return append(b, '"'), nil
		}
	}
	return encodeSlow(v)
}

// encodeSlow is Encode of a json.RawMessage and of what has no fast path.
// Out of line: Encode's own frame stays small, so that a task's goroutine
// encodes a plain result on the stack it started with (decision 770).
//
//go:noinline
func encodeSlow(v any) (json.RawMessage, error) {
	if x, ok := v.(json.RawMessage); ok {
		if x == nil {
			return jsonNullValue, nil
		}
		var buf bytes.Buffer
		if json.Compact(&buf, x) == nil {
			return buf.Bytes(), nil
		}
	}
	return json.Marshal(v)
}

// formatInt is strconv.AppendInt(nil, x, 10) in one small frame (the
// strconv path is three frames deep).
func formatInt(x int64) json.RawMessage {
	var buf [20]byte // -9223372036854775808
	i := len(buf)
	u := uint64(x)
	if x < 0 {
		u = -u
	}
	for u >= 10 {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	i--
	buf[i] = byte('0' + u)
	if x < 0 {
		i--
		buf[i] = '-'
	}
	return append(json.RawMessage(nil), buf[i:]...)
}

// plainASCII reports whether s needs no escaping in JSON, as encoding/json
// escapes it (including its HTML-safe escapes).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

var jsonNullValue = json.RawMessage("null")
