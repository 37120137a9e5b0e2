package jsoncap

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
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
	case json.RawMessage:
		if x == nil {
			return jsonNullValue, nil
		}
		var buf bytes.Buffer
		if json.Compact(&buf, x) == nil {
			return buf.Bytes(), nil
		}
	case bool:
		if x {
			return json.RawMessage("true"), nil
		}
		return json.RawMessage("false"), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) && x == math.Trunc(x) && math.Abs(x) < 1e15 && !math.Signbit(x) {
			return strconv.AppendInt(nil, int64(x), 10), nil
		}
	case string:
		if plainASCII(x) {
			b := make([]byte, 0, len(x)+2)
			b = append(b, '"')
			b = append(b, x...)
			return append(b, '"'), nil
		}
	}
	return json.Marshal(v)
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
