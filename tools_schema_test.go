package bgtask

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ttCompile compiles a tool's schema, as the tool exposes it, with a real
// JSON Schema (2020-12) validator; compiling also checks it against the
// meta-schema.
func ttCompile(t testing.TB, tool Tool) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(tool.Schema)))
	if err != nil {
		t.Fatalf("%s: schema: %v", tool.Name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(tool.Name+".json", doc); err != nil {
		t.Fatalf("%s: schema: %v", tool.Name, err)
	}
	s, err := c.Compile(tool.Name + ".json")
	if err != nil {
		t.Fatalf("%s: schema: %v", tool.Name, err)
	}
	return s
}

// ttSchemaAccepts reports whether args is one JSON value that the schema
// accepts, as a host that validates a model's arguments would find.
func ttSchemaAccepts(s *jsonschema.Schema, args string) (bool, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return false, err
	}
	if err := s.Validate(v); err != nil {
		return false, err
	}
	return true, nil
}

// ttDecoders are the tools' argument decoders, by tool name.
var ttDecoders = map[string]func([]byte) error{
	"list_tasks":   func(raw []byte) error { _, err := decodeListArgs(raw); return err },
	"get_task":     func(raw []byte) error { _, err := decodeGetArgs(raw); return err },
	"cancel_task":  func(raw []byte) error { _, err := decodeCancelArgs(raw); return err },
	"send_message": func(raw []byte) error { _, err := decodeSendArgs(raw); return err },
	"wait_task":    func(raw []byte) error { _, err := decodeWaitArgs(raw, waitMaxSeconds); return err },
}

type ttVerdict struct {
	args string
	ok   bool // want: accepted by both the schema and the decoder
}

// ttEveryTool are rows every tool refuses.
var ttEveryTool = []ttVerdict{
	{``, false},
	{`null`, false},
	{`[]`, false},
	{`[{}]`, false},
	{`"{}"`, false},
	{`42`, false},
	{`true`, false},
	{`{`, false},
	{`{"a":1,}`, false},
	{`{} {}`, false},
	{`{}x`, false},
	{`{"foo":1}`, false},
	{`{"foo":null}`, false},
	{`{"":null}`, false},
}

// ttString is a JSON string of n copies of s.
func ttString(s string, n int) string { return ttArgs(strings.Repeat(s, n)) }

// ttSchemaRows are each tool's rows: blank and whitespace-only strings,
// nulls for optional fields, integers written as floats, negative and huge
// numbers, duplicate keys, unknown fields, wrong types, cross-field rules,
// the empty object, long strings at and over their caps.
var ttSchemaRows = map[string][]ttVerdict{
	"list_tasks": {
		{`{}`, true},
		{` {} `, true},
		{`{"status":["running"]}`, true},
		{`{"status":["queued","running","awaiting_input","completed","failed","cancelled","interrupted"]}`, true},
		{`{"status":"running"}`, false},
		{`{"status":[]}`, false},
		{`{"status":["running","running"]}`, false},
		{`{"status":["done"]}`, false},
		{`{"status":["Running"]}`, false},
		{`{"status":[""]}`, false},
		{`{"status":[null]}`, false},
		{`{"status":[1]}`, false},
		{`{"status":{}}`, false},
		{`{"status":null}`, true},
		{`{"status":["running"],"status":["failed"]}`, true},
		{`{"status":["bogus"],"status":["failed"]}`, true},
		{`{"status":["failed"],"status":null}`, true},
		{`{"Status":["running"]}`, false},
		{`{"type":"report"}`, true},
		{`{"type":" report "}`, true},
		{`{"type":""}`, false},
		{`{"type":" \t\n\r"}`, false},
		{`{"type":"\u000b\f"}`, false},
		{`{"type":"\u00a0\u2003\u3000"}`, false},
		{`{"type":"\u0085\u2028\u2029\u202f\u205f\u1680"}`, false},
		{`{"type":"\ufeff"}`, true},
		{`{"type":"\u200b"}`, true},
		{`{"type":null}`, true},
		{`{"type":1}`, false},
		{`{"type":["report"]}`, false},
		{`{"type":` + ttString("x", 128) + `}`, true},
		{`{"type":` + ttString("é", 128) + `}`, true},
		{`{"type":` + ttString("x", 129) + `}`, false},
		{`{"type":` + ttString(" ", 129) + `}`, false},
		{`{"limit":1}`, true},
		{`{"limit":200}`, true},
		{`{"limit":50.0}`, true},
		{`{"limit":5e1}`, true},
		{`{"limit":2E+2}`, true},
		{`{"limit":2000e-1}`, true},
		{`{"limit":-0}`, false},
		{`{"limit":0}`, false},
		{`{"limit":-1}`, false},
		{`{"limit":201}`, false},
		{`{"limit":1.5}`, false},
		{`{"limit":1e-400}`, false},
		{`{"limit":1e400}`, false},
		{`{"limit":-1e400}`, false},
		{`{"limit":99999999999999999999999}`, false},
		{`{"limit":10.000000000000000001}`, false},
		{`{"limit":199.99999999999999999}`, false},
		{`{"limit":"10"}`, false},
		{`{"limit":true}`, false},
		{`{"limit":null}`, true},
		{`{"limit":10,"limit":20}`, true},
		{`{"cursor":"00000000000000017461736b5f78"}`, true},
		{`{"cursor":"ffffffffffffffff74"}`, true},
		{`{"cursor":null}`, true},
		{`{"cursor":""}`, false},
		{`{"cursor":" "}`, false},
		{`{"cursor":"0000000000000001"}`, false},
		{`{"cursor":"00000000000000017461736b5f7"}`, false},
		{`{"cursor":"00000000000000017461736B5F78"}`, false},
		{`{"cursor":" 00000000000000017461736b5f78"}`, false},
		{`{"cursor":"00000000000000017461736b5f78\n"}`, false},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 128) + `"}`, true},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 129) + `"}`, false},
		{`{"cursor":1}`, false},
		{`{"status":["running"],"type":"task","limit":10,"cursor":"00000000000000017461736b5f78"}`, true},
	},
	"get_task": {
		{`{}`, false},
		{`{"task_id":"task_x"}`, true},
		{`{"task_id":" task_x\n"}`, true},
		{`{"task_id":""}`, false},
		{`{"task_id":" \t\n"}`, false},
		{`{"task_id":"\u00a0\u2003"}`, false},
		{`{"task_id":null}`, false},
		{`{"task_id":42}`, false},
		{`{"task_id":["task_x"]}`, false},
		{`{"task_id":` + ttString("x", 128) + `}`, true},
		{`{"task_id":` + ttString("x", 129) + `}`, false},
		{`{"task_id":"task_x","task_id":"task_y"}`, true},
		{`{"task_id":"","task_id":"task_y"}`, true},
		{`{"task_id":"task_x","task_id":null}`, false},
		{`{"task_id":"task_x","task_id":" "}`, false},
		{`{"Task_ID":"task_x"}`, false},
		{`{"task_id":"task_x","foo":null}`, false},
	},
	"cancel_task": {
		{`{}`, false},
		{`{"target":{"relation":"self"}}`, true},
		{`{"target":{"relation":"self","name":null}}`, true},
		{`{"target":{"relation":"self","name":"x"}}`, false},
		{`{"target":{"relation":"self","name":""}}`, false},
		{`{"target":{"relation":"child","name":"crawler"}}`, true},
		{`{"target":{"relation":"child","name":" crawler "}}`, true},
		{`{"target":{"relation":"child","name":""}}`, false},
		{`{"target":{"relation":"child","name":"  "}}`, false},
		{`{"target":{"relation":"child","name":"\u3000"}}`, false},
		{`{"target":{"relation":"child","name":null}}`, false},
		{`{"target":{"relation":"child"}}`, false},
		{`{"target":{"relation":"child","name":7}}`, false},
		{`{"target":{"relation":"child","name":` + ttString("n", 128) + `}}`, true},
		{`{"target":{"relation":"child","name":` + ttString("n", 129) + `}}`, false},
		{`{"target":{"relation":"parent"}}`, false},
		{`{"target":{"relation":" self"}}`, false},
		{`{"target":{"relation":null}}`, false},
		{`{"target":{}}`, false},
		{`{"target":null}`, false},
		{`{"target":"self"}`, false},
		{`{"target":[]}`, false},
		{`{"target":{"relation":"self","extra":1}}`, false},
		{`{"target":{"relation":"self"},"target":{"relation":"child","name":"w"}}`, true},
		{`{"target":{"relation":"child","name":"w","name":"v"}}`, true},
		{`{"target":{"relation":"child","name":"w","relation":"self"}}`, false},
		{`{"target":{"relation":"self"},"task_id":"task_x"}`, false},
	},
	"send_message": {
		{`{}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi"}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":" hi "}`, true},
		{`{"to":{"relation":"parent"},"message":"done"}`, true},
		{`{"to":{"relation":"parent","name":null},"message":"done"}`, true},
		{`{"to":{"relation":"parent","name":"boss"},"message":"done"}`, false},
		{`{"to":{"relation":"child"},"message":"hi"}`, false},
		{`{"to":{"relation":"child","name":""},"message":"hi"}`, false},
		{`{"to":{"relation":"child","name":" "},"message":"hi"}`, false},
		{`{"to":{"relation":"self"},"message":"hi"}`, false},
		{`{"to":"worker","message":"hi"}`, false},
		{`{"to":null,"message":"hi"}`, false},
		{`{"message":"hi"}`, false},
		{`{"to":{"relation":"child","name":"worker"}}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":null}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":""}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":" \n\t"}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"\u2028\u00a0"}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":5}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":{"text":"hi"}}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("m", 16384) + `}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("€", 16384) + `}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("m", 16385) + `}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":"input_1"}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":""}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":" "}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":1}`, false},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + ttString("i", 128) + `}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + ttString("i", 129) + `}`, false},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":"input_1"}`, false},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":null}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","message":"ho"}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"","message":"ho"}`, true},
		{`{"to":{"relation":"parent"},"to":{"relation":"child","name":"w"},"message":"hi","in_reply_to":"input_1"}`, true},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","content":"hi"}`, false},
	},
	"wait_task": {
		{`{}`, false},
		{`{"timeout_seconds":5}`, false},
		{`{"task_id":"task_x"}`, true},
		{`{"task_id":""}`, false},
		{`{"task_id":"\u2003"}`, false},
		{`{"task_id":` + ttString("x", 129) + `}`, false},
		{`{"task_id":"task_x","timeout_seconds":1}`, true},
		{`{"task_id":"task_x","timeout_seconds":300}`, true},
		{`{"task_id":"task_x","timeout_seconds":30.0}`, true},
		{`{"task_id":"task_x","timeout_seconds":3e1}`, true},
		{`{"task_id":"task_x","timeout_seconds":3.0e+2}`, true},
		{`{"task_id":"task_x","timeout_seconds":null}`, true},
		{`{"task_id":"task_x","timeout_seconds":0}`, false},
		{`{"task_id":"task_x","timeout_seconds":-5}`, false},
		{`{"task_id":"task_x","timeout_seconds":301}`, false},
		{`{"task_id":"task_x","timeout_seconds":1.5}`, false},
		{`{"task_id":"task_x","timeout_seconds":1e400}`, false},
		{`{"task_id":"task_x","timeout_seconds":99999999999999999999}`, false},
		{`{"task_id":"task_x","timeout_seconds":1.0000000000000001}`, false},
		{`{"task_id":"task_x","timeout_seconds":300.00000000000001}`, false},
		{`{"task_id":"task_x","timeout_seconds":"30"}`, false},
		{`{"task_id":"task_x","timeout_seconds":true}`, false},
		{`{"task_id":"task_x","timeout_seconds":5,"timeout_seconds":6}`, true},
		{`{"task_id":"task_x","timeout":30}`, false},
	},
}

// TestToolSchemasMatchDecoders: for every tool, a real JSON Schema
// validator over the tool's schema and the tool's decoder give the same
// verdict on every row, and it is the row's.
func TestToolSchemasMatchDecoders(t *testing.T) {
	m := newTestManager(t)
	for _, tool := range m.Owner("thread-1").Tools() {
		t.Run(tool.Name, func(t *testing.T) {
			s, decode := ttCompile(t, tool), ttDecoders[tool.Name]
			rows := append(append([]ttVerdict{}, ttEveryTool...), ttSchemaRows[tool.Name]...)
			for _, row := range rows {
				schemaOK, schemaErr := ttSchemaAccepts(s, row.args)
				decErr := decode([]byte(row.args))
				if schemaOK != (decErr == nil) || schemaOK != row.ok {
					t.Errorf("%s: schema accepts %v (%v), decoder accepts %v (%v); want %v",
						ttShort(row.args), schemaOK, schemaErr, decErr == nil, decErr, row.ok)
				}
			}
		})
	}
}

// TestWaitTaskSchemaWithLimit: the schema follows WithWaitLimit.
func TestWaitTaskSchemaWithLimit(t *testing.T) {
	m := newTestManager(t)
	tool := ttTool(t, m.Owner("thread-1"), "wait_task", WithWaitLimit(10*time.Second))
	s := ttCompile(t, tool)
	for _, row := range []ttVerdict{
		{`{"task_id":"task_x","timeout_seconds":10}`, true},
		{`{"task_id":"task_x","timeout_seconds":1e1}`, true},
		{`{"task_id":"task_x","timeout_seconds":11}`, false},
		{`{"task_id":"task_x","timeout_seconds":300}`, false},
	} {
		schemaOK, _ := ttSchemaAccepts(s, row.args)
		_, decErr := decodeWaitArgs([]byte(row.args), 10)
		if schemaOK != row.ok || (decErr == nil) != row.ok {
			t.Errorf("%s: schema accepts %v, decoder accepts %v (%v); want %v", row.args, schemaOK, decErr == nil, decErr, row.ok)
		}
	}
}

// ttShort shortens a long row for an error message.
func ttShort(s string) string {
	if len(s) <= 120 {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:120], len(s))
}

// TestNotBlankPattern: the schemas' pattern matches a string exactly when
// the decoder finds it not blank, for every character up to U+FFFF (the
// spaces are all below U+3001) and a few above.
func TestNotBlankPattern(t *testing.T) {
	re := regexp.MustCompile(notBlankPattern)
	for r := rune(0); r <= 0x10ffff; r++ {
		if r > 0xffff && r%0x1000 != 0 && r != 0x10ffff {
			continue
		}
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates are not characters
		}
		s := string(r)
		if match, _ := nonBlank(s, "x"); re.MatchString(s) != (match != "") {
			t.Errorf("U+%04X: pattern matches %v, unicode.IsSpace %v", r, re.MatchString(s), unicode.IsSpace(r))
		}
	}
}

// FuzzToolSchemas: on any input, every tool's schema and decoder give the
// same verdict. (Inputs with exponents of five digits or more are skipped:
// the validator computes such numbers exactly, which takes long.)
func FuzzToolSchemas(f *testing.F) {
	m := newTestManager(f)
	tools := m.Owner("thread-1").Tools()
	schemas := make([]*jsonschema.Schema, len(tools))
	for i, tool := range tools {
		schemas[i] = ttCompile(f, tool)
		for _, row := range ttSchemaRows[tool.Name] {
			f.Add(row.args)
		}
	}
	hugeExp := regexp.MustCompile(`[eE][+-]?[0-9]{5}`)
	f.Fuzz(func(t *testing.T, args string) {
		if hugeExp.MatchString(args) {
			t.Skip()
		}
		for i, tool := range tools {
			schemaOK, schemaErr := ttSchemaAccepts(schemas[i], args)
			decErr := ttDecoders[tool.Name]([]byte(args))
			if schemaOK != (decErr == nil) {
				t.Errorf("%s(%q): schema accepts %v (%v), decoder accepts %v (%v)", tool.Name, args, schemaOK, schemaErr, decErr == nil, decErr)
			}
		}
	})
}
