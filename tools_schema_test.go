package bgtask

import (
	"encoding/json"
	"fmt"
	"io"
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
	want ttWant
}

// ttWant is a row's verdict: the decoder's (the tool's), and whether the
// schema differs. A strict-mode schema cannot say every rule the decoder
// carries: on a call with every key given, the schema accepts what the
// decoder refuses for one of the ttBad... reasons, and only for those. A
// key left out is the other way round: the decoder reads it as null, the
// schema requires every key.
type ttWant int

const (
	ttOK          ttWant = iota // both accept
	ttBad                       // both refuse
	ttBadLength                 // longer than the cap: strict mode has no maxLength
	ttBadTwice                  // a status listed twice: strict mode has no uniqueItems
	ttBadRelation               // a field the relation needs or refuses: strict mode has no oneOf, if/then
	ttBadRange                  // an integer out of range: Anthropic's strict mode has no minimum, maximum
)

// ttGapError matches the decoder's error for each ttBad... gap, exactly as the
// Tools doc comment lists it.
var ttGapError = regexp.MustCompile(`^invalid arguments: (?:` +
	`"[a-z_.]+" is longer than [0-9]+ characters|` + // ttBadLength
	`"status" lists "[a-z_]+" twice|` + // ttBadTwice
	`"(?:limit|timeout_seconds)" must be from 1 to [0-9]+|` + // ttBadRange
	`"(?:target\.name|to\.name|in_reply_to)" is not allowed with relation "(?:self|parent)"|missing "(?:target|to)\.name"` + // ttBadRelation
	`)$`)

// ttEveryTool are rows every tool refuses.
var ttEveryTool = []ttVerdict{
	{``, ttBad},
	{`null`, ttBad},
	{`[]`, ttBad},
	{`[{}]`, ttBad},
	{`"{}"`, ttBad},
	{`42`, ttBad},
	{`true`, ttBad},
	{`{`, ttBad},
	{`{"a":1,}`, ttBad},
	{`{} {}`, ttBad},
	{`{}x`, ttBad},
	{`{"foo":1}`, ttBad},
	{`{"foo":null}`, ttBad},
	{`{"":null}`, ttBad},
}

// ttString is a JSON string of n copies of s.
func ttString(s string, n int) string { return ttArgs(strings.Repeat(s, n)) }

// ttSchemaRows are each tool's rows: blank and whitespace-only strings,
// nulls for optional fields, integers written as floats, negative and huge
// numbers, duplicate keys, unknown fields, wrong types, cross-field rules,
// the empty object, long strings at and over their caps.
var ttSchemaRows = map[string][]ttVerdict{
	"list_tasks": {
		{`{}`, ttOK},
		{` {} `, ttOK},
		{`{"status":["running"]}`, ttOK},
		{`{"status":["queued","running","awaiting_input","completed","failed","cancelled","interrupted"]}`, ttOK},
		{`{"status":"running"}`, ttBad},
		{`{"status":[]}`, ttBad},
		{`{"status":["running","running"]}`, ttBadTwice},
		{`{"status":["done"]}`, ttBad},
		{`{"status":["Running"]}`, ttBad},
		{`{"status":[""]}`, ttBad},
		{`{"status":[null]}`, ttBad},
		{`{"status":[1]}`, ttBad},
		{`{"status":{}}`, ttBad},
		{`{"status":null}`, ttOK},
		{`{"status":["running"],"status":["failed"]}`, ttOK},
		{`{"status":["bogus"],"status":["failed"]}`, ttOK},
		{`{"status":["failed"],"status":null}`, ttOK},
		{`{"Status":["running"]}`, ttBad},
		{`{"type":"report"}`, ttOK},
		{`{"type":" report "}`, ttOK},
		{`{"type":""}`, ttBad},
		{`{"type":" \t\n\r"}`, ttBad},
		{`{"type":"\u000b\f"}`, ttBad},
		{`{"type":"\u00a0\u2003\u3000"}`, ttBad},
		{`{"type":"\u0085\u2028\u2029\u202f\u205f\u1680"}`, ttBad},
		{`{"type":"\ufeff"}`, ttOK},
		{`{"type":"\u200b"}`, ttOK},
		{`{"type":null}`, ttOK},
		{`{"type":1}`, ttBad},
		{`{"type":["report"]}`, ttBad},
		{`{"type":` + ttString("x", 128) + `}`, ttOK},
		{`{"type":` + ttString("é", 128) + `}`, ttOK},
		{`{"type":` + ttString("x", 129) + `}`, ttBadLength},
		{`{"type":` + ttString(" ", 129) + `}`, ttBad},
		{`{"limit":1}`, ttOK},
		{`{"limit":200}`, ttOK},
		{`{"limit":50.0}`, ttOK},
		{`{"limit":5e1}`, ttOK},
		{`{"limit":2E+2}`, ttOK},
		{`{"limit":2000e-1}`, ttOK},
		{`{"limit":-0}`, ttBadRange},
		{`{"limit":0}`, ttBadRange},
		{`{"limit":-1}`, ttBadRange},
		{`{"limit":201}`, ttBadRange},
		{`{"limit":1.5}`, ttBad},
		{`{"limit":1e-400}`, ttBad},
		{`{"limit":1e400}`, ttBadRange},
		{`{"limit":-1e400}`, ttBadRange},
		{`{"limit":99999999999999999999999}`, ttBadRange},
		{`{"limit":10.000000000000000001}`, ttBad},
		{`{"limit":199.99999999999999999}`, ttBad},
		{`{"limit":"10"}`, ttBad},
		{`{"limit":true}`, ttBad},
		{`{"limit":null}`, ttOK},
		{`{"limit":10,"limit":20}`, ttOK},
		{`{"cursor":"00000000000000017461736b5f78"}`, ttOK},
		{`{"cursor":"ffffffffffffffff74"}`, ttOK},
		{`{"cursor":null}`, ttOK},
		{`{"cursor":""}`, ttBad},
		{`{"cursor":" "}`, ttBad},
		{`{"cursor":"0000000000000001"}`, ttBad},
		{`{"cursor":"00000000000000017461736b5f7"}`, ttBad},
		{`{"cursor":"00000000000000017461736B5F78"}`, ttBad},
		{`{"cursor":" 00000000000000017461736b5f78"}`, ttBad},
		{`{"cursor":"00000000000000017461736b5f78\n"}`, ttBad},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 128) + `"}`, ttOK},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 129) + `"}`, ttBadLength},
		{`{"cursor":1}`, ttBad},
		{`{"status":["running"],"type":"task","limit":10,"cursor":"00000000000000017461736b5f78"}`, ttOK},
		{`{"status":null,"type":null,"limit":null,"cursor":null}`, ttOK},
		{`{"status":["running","awaiting_input"],"type":null,"limit":20,"cursor":null}`, ttOK},
		{`{"status":["running","running"],"type":null,"limit":null,"cursor":null}`, ttBadTwice},
		{`{"status":null,"type":` + ttString("x", 129) + `,"limit":null,"cursor":null}`, ttBadLength},
		{`{"status":null,"type":" ","limit":null,"cursor":null}`, ttBad},
		{`{"status":null,"type":null,"limit":0,"cursor":null}`, ttBadRange},
	},
	"get_task": {
		{`{}`, ttBad},
		{`{"task_id":"task_x"}`, ttOK},
		{`{"task_id":" task_x\n"}`, ttOK},
		{`{"task_id":""}`, ttBad},
		{`{"task_id":" \t\n"}`, ttBad},
		{`{"task_id":"\u00a0\u2003"}`, ttBad},
		{`{"task_id":null}`, ttBad},
		{`{"task_id":42}`, ttBad},
		{`{"task_id":["task_x"]}`, ttBad},
		{`{"task_id":` + ttString("x", 128) + `}`, ttOK},
		{`{"task_id":` + ttString("x", 129) + `}`, ttBadLength},
		{`{"task_id":"task_x","task_id":"task_y"}`, ttOK},
		{`{"task_id":"","task_id":"task_y"}`, ttOK},
		{`{"task_id":"task_x","task_id":null}`, ttBad},
		{`{"task_id":"task_x","task_id":" "}`, ttBad},
		{`{"Task_ID":"task_x"}`, ttBad},
		{`{"task_id":"task_x","foo":null}`, ttBad},
	},
	"cancel_task": {
		{`{}`, ttBad},
		{`{"target":{"relation":"self"}}`, ttOK},
		{`{"target":{"relation":"self","name":null}}`, ttOK},
		{`{"target":{"relation":"self","name":"x"}}`, ttBadRelation},
		{`{"target":{"relation":"self","name":""}}`, ttBad},
		{`{"target":{"relation":"child","name":"crawler"}}`, ttOK},
		{`{"target":{"relation":"child","name":" crawler "}}`, ttOK},
		{`{"target":{"relation":"child","name":""}}`, ttBad},
		{`{"target":{"relation":"child","name":"  "}}`, ttBad},
		{`{"target":{"relation":"child","name":"\u3000"}}`, ttBad},
		{`{"target":{"relation":"child","name":null}}`, ttBadRelation},
		{`{"target":{"relation":"child"}}`, ttBadRelation},
		{`{"target":{"relation":"child","name":7}}`, ttBad},
		{`{"target":{"relation":"child","name":` + ttString("n", 128) + `}}`, ttOK},
		{`{"target":{"relation":"child","name":` + ttString("n", 129) + `}}`, ttBadLength},
		{`{"target":{"relation":"parent"}}`, ttBad},
		{`{"target":{"relation":" self"}}`, ttBad},
		{`{"target":{"relation":null}}`, ttBad},
		{`{"target":{}}`, ttBad},
		{`{"target":null}`, ttBad},
		{`{"target":"self"}`, ttBad},
		{`{"target":[]}`, ttBad},
		{`{"target":{"relation":"self","extra":1}}`, ttBad},
		{`{"target":{"relation":"self"},"target":{"relation":"child","name":"w"}}`, ttOK},
		{`{"target":{"relation":"child","name":"w","name":"v"}}`, ttOK},
		{`{"target":{"relation":"child","name":"w","relation":"self"}}`, ttBadRelation},
		{`{"target":{"relation":"self"},"task_id":"task_x"}`, ttBad},
		{`{"target":{"relation":"self","name":null}}`, ttOK},
		{`{"target":{"relation":"child","name":"crawler"}}`, ttOK},
		{`{"target":{"relation":"self","name":"crawler"}}`, ttBadRelation},
		{`{"target":{"relation":"child","name":null}}`, ttBadRelation},
		{`{"target":{"relation":null,"name":null}}`, ttBad},
	},
	"send_message": {
		{`{}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi"}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":" hi "}`, ttOK},
		{`{"to":{"relation":"parent"},"message":"done"}`, ttOK},
		{`{"to":{"relation":"parent","name":null},"message":"done"}`, ttOK},
		{`{"to":{"relation":"parent","name":"boss"},"message":"done"}`, ttBadRelation},
		{`{"to":{"relation":"child"},"message":"hi"}`, ttBadRelation},
		{`{"to":{"relation":"child","name":""},"message":"hi"}`, ttBad},
		{`{"to":{"relation":"child","name":" "},"message":"hi"}`, ttBad},
		{`{"to":{"relation":"self"},"message":"hi"}`, ttBad},
		{`{"to":"worker","message":"hi"}`, ttBad},
		{`{"to":null,"message":"hi"}`, ttBad},
		{`{"message":"hi"}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"}}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":null}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":""}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":" \n\t"}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"\u2028\u00a0"}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":5}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":{"text":"hi"}}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("m", 16384) + `}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("€", 16384) + `}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":` + ttString("m", 16385) + `}`, ttBadLength},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":"input_1"}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":""}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":" "}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":1}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + ttString("i", 128) + `}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + ttString("i", 129) + `}`, ttBadLength},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":"input_1"}`, ttBadRelation},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":null}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","message":"ho"}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"","message":"ho"}`, ttOK},
		{`{"to":{"relation":"parent"},"to":{"relation":"child","name":"w"},"message":"hi","in_reply_to":"input_1"}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","content":"hi"}`, ttBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`, ttOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":"input_1"}`, ttOK},
		{`{"to":{"relation":"parent","name":null},"message":"done","in_reply_to":null}`, ttOK},
		{`{"to":{"relation":"parent","name":null},"message":"done","in_reply_to":"input_1"}`, ttBadRelation},
		{`{"to":{"relation":"parent","name":"boss"},"message":"done","in_reply_to":null}`, ttBadRelation},
		{`{"to":{"relation":"child","name":null},"message":"hi","in_reply_to":null}`, ttBadRelation},
		{`{"to":{"relation":"child","name":"worker"},"message":null,"in_reply_to":null}`, ttBad},
	},
	"wait_task": {
		{`{}`, ttBad},
		{`{"timeout_seconds":5}`, ttBad},
		{`{"task_id":"task_x"}`, ttOK},
		{`{"task_id":""}`, ttBad},
		{`{"task_id":"\u2003"}`, ttBad},
		{`{"task_id":` + ttString("x", 129) + `}`, ttBadLength},
		{`{"task_id":"task_x","timeout_seconds":1}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":300}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":30.0}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":3e1}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":3.0e+2}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":null}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":0}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":-5}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":301}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":1.5}`, ttBad},
		{`{"task_id":"task_x","timeout_seconds":1e400}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":99999999999999999999}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":1.0000000000000001}`, ttBad},
		{`{"task_id":"task_x","timeout_seconds":300.00000000000001}`, ttBad},
		{`{"task_id":"task_x","timeout_seconds":"30"}`, ttBad},
		{`{"task_id":"task_x","timeout_seconds":true}`, ttBad},
		{`{"task_id":"task_x","timeout_seconds":5,"timeout_seconds":6}`, ttOK},
		{`{"task_id":"task_x","timeout":30}`, ttBad},
		{`{"task_id":null,"timeout_seconds":null}`, ttBad},
	},
}

// TestToolSchemasMatchDecoders: for every tool, a real JSON Schema
// validator over the tool's schema and the tool's decoder agree on every
// row, save for the row's gap: the decoder gives the row's verdict (a gap's
// with the gap's error); the schema gives the same verdict once every key
// is given (null for a key left out, which the decoder reads the same), but
// accepts a gap's row; and it refuses a call that leaves a key out.
func TestToolSchemasMatchDecoders(t *testing.T) {
	m := newTestManager(t)
	for _, tool := range m.Owner("thread-1").Tools() {
		t.Run(tool.Name, func(t *testing.T) {
			s, decode := ttCompile(t, tool), ttDecoders[tool.Name]
			rows := append(append([]ttVerdict{}, ttEveryTool...), ttSchemaRows[tool.Name]...)
			for _, row := range rows {
				args := ttShort(row.args)
				decErr := decode([]byte(row.args))
				switch {
				case (decErr == nil) != (row.want == ttOK):
					t.Errorf("%s: decoder accepts %v (%v); want %v", args, decErr == nil, decErr, row.want == ttOK)
				case row.want > ttBad && !ttGapError.MatchString(decErr.Error()):
					t.Errorf("%s: decoder error %q is not one a schema cannot say", args, decErr)
				}
				schemaOK, schemaErr := ttSchemaAccepts(s, row.args)
				filled, added, isObject := ttFill(tool.Schema, row.args)
				if !isObject {
					if schemaOK {
						t.Errorf("%s: schema accepts what is not one JSON object", args)
					}
					continue
				}
				if added && schemaOK {
					t.Errorf("%s: schema accepts a call that leaves a key out", args)
				}
				filledOK, filledErr := ttSchemaAccepts(s, filled)
				if !added && filledOK != schemaOK {
					t.Errorf("%s: schema accepts %v, re-encoded %v", args, schemaOK, filledOK)
				}
				if want := row.want != ttBad; filledOK != want {
					t.Errorf("%s with every key: schema accepts %v (%v, %v); want %v", args, filledOK, schemaErr, filledErr, want)
				}
				if fillErr := decode([]byte(filled)); fmt.Sprint(fillErr) != fmt.Sprint(decErr) {
					t.Errorf("%s with every key: decoder says %v, without %v", args, fillErr, decErr)
				}
			}
		})
	}
}

// ttFill reads args as one JSON object and returns it with every key that
// the schema lists and args leaves out given as null, in nested objects
// too, and whether it added any. isObject is false if args is not one
// JSON object. A key given twice keeps its last value, as both the
// decoder and the validator read it.
func ttFill(schema json.RawMessage, args string) (filled string, added, isObject bool) {
	var sch map[string]any
	if err := json.Unmarshal(schema, &sch); err != nil {
		panic(err)
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false, false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false, false
	}
	added = ttFillObject(obj, sch)
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b), added, true
}

func ttFillObject(obj, schema map[string]any) (added bool) {
	props, _ := schema["properties"].(map[string]any)
	for key, ps := range props {
		v, ok := obj[key]
		if !ok {
			obj[key], added = nil, true
			continue
		}
		nested, isObj := v.(map[string]any)
		if nestedSchema, hasSchema := ps.(map[string]any); isObj && hasSchema && ttFillObject(nested, nestedSchema) {
			added = true
		}
	}
	return added
}

// TestWaitTaskSchemaWithLimit: the decoder follows WithWaitLimit, and the
// schema's description says the limit (strict mode has no maximum).
func TestWaitTaskSchemaWithLimit(t *testing.T) {
	m := newTestManager(t)
	tool := ttTool(t, m.Owner("thread-1"), "wait_task", WithWaitLimit(10*time.Second))
	s := ttCompile(t, tool)
	for _, row := range []ttVerdict{
		{`{"task_id":"task_x","timeout_seconds":10}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":1e1}`, ttOK},
		{`{"task_id":"task_x","timeout_seconds":11}`, ttBadRange},
		{`{"task_id":"task_x","timeout_seconds":300}`, ttBadRange},
	} {
		schemaOK, _ := ttSchemaAccepts(s, row.args)
		_, decErr := decodeWaitArgs([]byte(row.args), 10)
		if schemaOK != (row.want != ttBad) || (decErr == nil) != (row.want == ttOK) {
			t.Errorf("%s: schema accepts %v, decoder accepts %v (%v); want %v", row.args, schemaOK, decErr == nil, decErr, row.want)
		}
		if row.want == ttBadRange && decErr.Error() != `invalid arguments: "timeout_seconds" must be from 1 to 10` {
			t.Errorf("%s: decoder error %v", row.args, decErr)
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

// FuzzToolSchemas: on any input, every tool's schema and decoder agree but
// for the gaps: when the schema accepts and the decoder refuses, the
// decoder's error is one a strict-mode schema cannot say; when the decoder
// accepts and the schema refuses, the input left keys out and the schema
// accepts it with them given as null. (Inputs with exponents of five digits
// or more are skipped: the validator computes such numbers exactly, which
// takes long.)
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
			switch {
			case schemaOK && decErr != nil && !ttGapError.MatchString(decErr.Error()):
				t.Errorf("%s(%q): schema accepts, decoder refuses with %v, a rule the schema can say", tool.Name, args, decErr)
			case !schemaOK && decErr == nil:
				filled, added, _ := ttFill(tool.Schema, args)
				if ok, err := ttSchemaAccepts(schemas[i], filled); !added || !ok {
					t.Errorf("%s(%q): decoder accepts, schema refuses (%v), with every key given too (%v)", tool.Name, args, schemaErr, err)
				}
			}
		}
	})
}
