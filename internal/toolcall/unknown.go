package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bgtask/bgtask/agent"
)

// The bounds of UnknownText: a made-up name is the model's text, and a
// host may hold many tools.
const (
	unknownNameMax = 64   // bytes of the name shown
	unknownTextMax = 1024 // bytes of the whole text, about
)

// UnknownText is the answer to a call of a tool called name that is not
// among tools (the model made the name up):
//
//	unknown tool "x": the tools are a, b, c
//
// ("there are no tools" for none). The name is quoted and cut to 64 bytes;
// the list stops at about 1 KiB, ending "and n more".
func UnknownText(name string, tools []agent.Tool) string {
	shown := name
	if len(shown) > unknownNameMax {
		cut := unknownNameMax
		for cut > 0 && !utf8.RuneStart(name[cut]) { // not inside a rune
			cut--
		}
		shown = name[:cut] + "…"
	}
	var b strings.Builder
	b.WriteString("unknown tool " + strconv.Quote(shown) + ": ")
	if len(tools) == 0 {
		b.WriteString("there are no tools")
		return b.String()
	}
	b.WriteString("the tools are ")
	for i, t := range tools {
		if i > 0 && b.Len()+len(t.Name) > unknownTextMax {
			b.WriteString(", and " + strconv.Itoa(len(tools)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.Name)
	}
	return b.String()
}

// Unknown returns the call id of a tool called name that is not among
// tools, with its arguments args: Answer answers it UnknownText, as a
// model's mistake, without running anything, in its place among the
// reply's calls.
func Unknown(id, name string, args json.RawMessage, tools []agent.Tool) Call {
	err := MarkModelError(errors.New(UnknownText(name, tools)))
	return Call{ID: id, Args: args, Tool: agent.Tool{
		Name: name,
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err },
	}}
}
