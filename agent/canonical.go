package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// canonicalJSON returns the JSON value r written one way only, so that a
// rendering has one text: compact, each string (keys too) as
// encoding/json writes it ("\u003c", never "\u003C", "\u0061" or a raw
// "<"; "é", never "\u00e9"), numbers as written, keys in their order. A
// result or payload is raw JSON that a task or a store may have escaped
// another way, and encoding/json keeps the escapes of raw JSON as they
// are. r is returned unchanged when it has no escape to rewrite, or when
// it is not one JSON value.
func canonicalJSON(r json.RawMessage) json.RawMessage {
	if bytes.IndexByte(r, '\\') < 0 && utf8.Valid(r) {
		return r // encoding/json compacts it and escapes <, > and & itself
	}
	type level struct {
		object bool
		n      int // tokens in it so far
	}
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	out := make([]byte, 0, len(r))
	var open []level
	for {
		tok, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF) && len(open) == 0 && len(out) > 0:
			return out
		case err != nil, len(open) == 0 && len(out) > 0: // bad, or a second value
			return r
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			open = open[:len(open)-1]
			out = append(out, byte(d))
			continue
		}
		if len(open) > 0 {
			l := &open[len(open)-1]
			switch {
			case l.object && l.n%2 == 1: // Token checked the syntax: keys and values alternate
				out = append(out, ':')
			case l.n > 0:
				out = append(out, ',')
			}
			l.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			open = append(open, level{object: v == '{'})
		case string:
			s, _ := json.Marshal(v) // a string always encodes
			out = append(out, s...)
		case json.Number:
			out = append(out, v...)
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
	}
}
