package agent

import (
	"encoding/json"

	"github.com/bgtask/bgtask/bgtype"
)

// decodeMessage reads the payload of an EventTypeMessage: a JSON string is
// the content, a Message is itself, anything else is kept as its JSON text.
func decodeMessage(payload json.RawMessage) bgtype.Message {
	var msg bgtype.Message
	if json.Unmarshal(payload, &msg.Content) != nil && json.Unmarshal(payload, &msg) != nil {
		msg = bgtype.Message{Content: string(payload)}
	}
	return msg
}
