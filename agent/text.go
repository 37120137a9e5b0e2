package agent

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/bgtask/bgtask/bgtype"
)

// cutRunes returns the longest prefix of s of at most n bytes that does not
// split a rune.
func cutRunes(s string, n int) string {
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

// decodeMessage reads the payload of an EventTypeMessage: a JSON string is
// the content, a Message is itself, anything else is kept as its JSON text.
func decodeMessage(payload json.RawMessage) bgtype.Message {
	var msg bgtype.Message
	if json.Unmarshal(payload, &msg.Content) != nil && json.Unmarshal(payload, &msg) != nil {
		msg = bgtype.Message{Content: string(payload)}
	}
	return msg
}

// validOwner reports whether id is a usable owner or run id: not empty,
// and not only white space (as the Manager reads it).
func validOwner(id string) bool {
	for _, r := range id {
		if !unicode.IsSpace(r) {
			return true
		}
	}
	return false
}
