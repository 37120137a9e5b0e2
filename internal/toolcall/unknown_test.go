package toolcall

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/agent"
)

// named returns tools with the given names, that nothing calls.
func named(names ...string) []agent.Tool {
	tools := make([]agent.Tool, len(names))
	for i, n := range names {
		tools[i] = agent.Tool{Name: n}
	}
	return tools
}

// The answer to a made-up tool names it, quoted and cut, and the tools
// there are, up to about 1 KiB.
func TestUnknownText(t *testing.T) {
	many := make([]string, 200)
	for i := range many {
		many[i] = fmt.Sprintf("tool_%03d", i)
	}
	// Names of 8 bytes, each after ", ": the list stops once the text
	// would pass 1024 bytes.
	head := `unknown tool "x": the tools are `
	shown := (1024 - len(head) + 2) / 10
	manyText := head + strings.Join(many[:shown], ", ") + fmt.Sprintf(", and %d more", len(many)-shown)
	for _, tc := range []struct {
		name  string
		tools []agent.Tool
		want  string
	}{
		{"x", named("a", "b", "c"), `unknown tool "x": the tools are a, b, c`},
		{"x", nil, `unknown tool "x": there are no tools`},
		{`say "<hi>"` + "\n", named("a"), `unknown tool "say \"<hi>\"\n": the tools are a`},
		{strings.Repeat("é", 40), named("a"), `unknown tool "` + strings.Repeat("é", 32) + `…": the tools are a`},
		{"x", named(many...), manyText},
	} {
		if got := UnknownText(tc.name, tc.tools); got != tc.want {
			t.Errorf("UnknownText(%q, %d tools) = %q, want %q", tc.name, len(tc.tools), got, tc.want)
		}
	}
	if got := UnknownText("x", named(many...)); len(got) > 1024+len(", and 200 more") {
		t.Errorf("UnknownText of 200 tools: %d bytes", len(got))
	}
}

// A call of an unknown tool is answered in its place, as the model's
// mistake, and runs nothing; the calls around it run.
func TestAnswerUnknown(t *testing.T) {
	s := newScript()
	known := s.calls("ok", "ok")
	tools := []agent.Tool{known[0].Tool}
	calls := []Call{known[0], Unknown("u1", "made_up", json.RawMessage(`{}`), tools), known[1]}
	got, err := Answer(t.Context(), calls, Config{Parallel: 2, Wrap: wrap})
	want := []Outcome{{`"c0"`, false}, {`unknown tool "made_up": the tools are job`, true}, {`"c1"`, false}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Answer = %+v, %v; want %+v", got, err, want)
	}
}
