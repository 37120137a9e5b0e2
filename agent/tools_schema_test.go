package agent

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

// compileSchema compiles a tool's schema, as the tool exposes it, with a real
// JSON Schema (2020-12) validator; compiling also checks it against the
// meta-schema.
func compileSchema(t testing.TB, tool Tool) *jsonschema.Schema {
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

// schemaAccepts reports whether args is one JSON value that the schema
// accepts, as a host that validates a model's arguments would find.
func schemaAccepts(s *jsonschema.Schema, args string) (bool, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return false, err
	}
	if err := s.Validate(v); err != nil {
		return false, err
	}
	return true, nil
}

// argDecoders are the tools' argument decoders, by tool name.
var argDecoders = map[string]func([]byte) error{
	"list_tasks":   func(raw []byte) error { _, err := decodeListArgs(raw); return err },
	"get_task":     func(raw []byte) error { _, err := decodeGetArgs(raw); return err },
	"cancel_task":  func(raw []byte) error { _, err := decodeCancelArgs(raw); return err },
	"send_message": func(raw []byte) error { _, err := decodeSendArgs(raw); return err },
	"wait_task":    func(raw []byte) error { _, err := decodeWaitArgs(raw, waitMaxSeconds); return err },
}

type verdict struct {
	args string
	want wantVerdict
}

// wantVerdict is a row's verdict: the decoder's (the tool's), and whether the
// schema differs. A strict-mode schema cannot say every rule the decoder
// carries: on a call with every key given, the schema accepts what the
// decoder refuses for one of the wantBad... reasons, and only for those. A
// key left out is the other way round: the decoder reads it as null, the
// schema requires every key.
type wantVerdict int

const (
	wantOK          wantVerdict = iota // both accept
	wantBad                            // both refuse
	wantBadLength                      // longer than the cap: strict mode has no maxLength
	wantBadTwice                       // a status listed twice: strict mode has no uniqueItems
	wantBadRelation                    // a field the relation needs or refuses: strict mode has no oneOf, if/then
	wantBadRange                       // an integer out of range: Anthropic's strict mode has no minimum, maximum
)

// gapError matches the decoder's error for each wantBad... gap, exactly as the
// Tools doc comment lists it.
var gapError = regexp.MustCompile(`^invalid arguments: (?:` +
	`"[a-z_.]+" is longer than [0-9]+ characters|` + // wantBadLength
	`"status" lists "[a-z_]+" twice|` + // wantBadTwice
	`"(?:limit|timeout_seconds|output_tail)" must be from 1 to [0-9]+|"output_since" must be from 0 to [0-9]+|` + // wantBadRange
	`"output_tail" is not allowed with "output_since"|` + // wantBadRelation
	`"(?:target\.name|to\.name|in_reply_to)" is not allowed with relation "(?:self|parent)"|missing "(?:target|to)\.name"` + // wantBadRelation
	`)$`)

// everyToolRows are rows every tool refuses.
var everyToolRows = []verdict{
	{``, wantBad},
	{`null`, wantBad},
	{`[]`, wantBad},
	{`[{}]`, wantBad},
	{`"{}"`, wantBad},
	{`42`, wantBad},
	{`true`, wantBad},
	{`{`, wantBad},
	{`{"a":1,}`, wantBad},
	{`{} {}`, wantBad},
	{`{}x`, wantBad},
	{`{"foo":1}`, wantBad},
	{`{"foo":null}`, wantBad},
	{`{"":null}`, wantBad},
}

// repeatedArg is a JSON string of n copies of s.
func repeatedArg(s string, n int) string { return toJSON(strings.Repeat(s, n)) }

// schemaRows are each tool's rows: blank and whitespace-only strings,
// nulls for optional fields, integers written as floats, negative and huge
// numbers, duplicate keys, unknown fields, wrong types, cross-field rules,
// the empty object, long strings at and over their caps.
var schemaRows = map[string][]verdict{
	"list_tasks": {
		{`{}`, wantOK},
		{` {} `, wantOK},
		{`{"status":["running"]}`, wantOK},
		{`{"status":["queued","running","awaiting_input","completed","failed","cancelled","interrupted"]}`, wantOK},
		{`{"status":"running"}`, wantBad},
		{`{"status":[]}`, wantBad},
		{`{"status":["running","running"]}`, wantBadTwice},
		{`{"status":["done"]}`, wantBad},
		{`{"status":["Running"]}`, wantBad},
		{`{"status":[""]}`, wantBad},
		{`{"status":[null]}`, wantBad},
		{`{"status":[1]}`, wantBad},
		{`{"status":{}}`, wantBad},
		{`{"status":null}`, wantOK},
		{`{"status":["running"],"status":["failed"]}`, wantOK},
		{`{"status":["bogus"],"status":["failed"]}`, wantOK},
		{`{"status":["failed"],"status":null}`, wantOK},
		{`{"Status":["running"]}`, wantBad},
		{`{"type":"report"}`, wantOK},
		{`{"type":" report "}`, wantOK},
		{`{"type":""}`, wantBad},
		{`{"type":" \t\n\r"}`, wantBad},
		{`{"type":"\u000b\f"}`, wantBad},
		{`{"type":"\u00a0\u2003\u3000"}`, wantBad},
		{`{"type":"\u0085\u2028\u2029\u202f\u205f\u1680"}`, wantBad},
		{`{"type":"\ufeff"}`, wantOK},
		{`{"type":"\u200b"}`, wantOK},
		{`{"type":null}`, wantOK},
		{`{"type":1}`, wantBad},
		{`{"type":["report"]}`, wantBad},
		{`{"type":` + repeatedArg("x", 128) + `}`, wantOK},
		{`{"type":` + repeatedArg("é", 128) + `}`, wantOK},
		{`{"type":` + repeatedArg("x", 129) + `}`, wantBadLength},
		{`{"type":` + repeatedArg(" ", 129) + `}`, wantBad},
		{`{"limit":1}`, wantOK},
		{`{"limit":200}`, wantOK},
		{`{"limit":50.0}`, wantOK},
		{`{"limit":5e1}`, wantOK},
		{`{"limit":2E+2}`, wantOK},
		{`{"limit":2000e-1}`, wantOK},
		{`{"limit":-0}`, wantBadRange},
		{`{"limit":0}`, wantBadRange},
		{`{"limit":-1}`, wantBadRange},
		{`{"limit":201}`, wantBadRange},
		{`{"limit":1.5}`, wantBad},
		{`{"limit":1e-400}`, wantBad},
		{`{"limit":1e400}`, wantBadRange},
		{`{"limit":-1e400}`, wantBadRange},
		{`{"limit":99999999999999999999999}`, wantBadRange},
		{`{"limit":10.000000000000000001}`, wantBad},
		{`{"limit":199.99999999999999999}`, wantBad},
		{`{"limit":"10"}`, wantBad},
		{`{"limit":true}`, wantBad},
		{`{"limit":null}`, wantOK},
		{`{"limit":10,"limit":20}`, wantOK},
		{`{"cursor":"00000000000000017461736b5f78"}`, wantOK},
		{`{"cursor":"ffffffffffffffff74"}`, wantOK},
		{`{"cursor":null}`, wantOK},
		{`{"cursor":""}`, wantBad},
		{`{"cursor":" "}`, wantBad},
		{`{"cursor":"0000000000000001"}`, wantBad},
		{`{"cursor":"00000000000000017461736b5f7"}`, wantBad},
		{`{"cursor":"00000000000000017461736B5F78"}`, wantBad},
		{`{"cursor":" 00000000000000017461736b5f78"}`, wantBad},
		{`{"cursor":"00000000000000017461736b5f78\n"}`, wantBad},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 128) + `"}`, wantOK},
		{`{"cursor":"0000000000000001` + strings.Repeat("61", 129) + `"}`, wantBadLength},
		{`{"cursor":1}`, wantBad},
		{`{"status":["running"],"type":"task","limit":10,"cursor":"00000000000000017461736b5f78"}`, wantOK},
		{`{"status":null,"type":null,"limit":null,"cursor":null}`, wantOK},
		{`{"status":["running","awaiting_input"],"type":null,"limit":20,"cursor":null}`, wantOK},
		{`{"status":["running","running"],"type":null,"limit":null,"cursor":null}`, wantBadTwice},
		{`{"status":null,"type":` + repeatedArg("x", 129) + `,"limit":null,"cursor":null}`, wantBadLength},
		{`{"status":null,"type":" ","limit":null,"cursor":null}`, wantBad},
		{`{"status":null,"type":null,"limit":0,"cursor":null}`, wantBadRange},
	},
	"get_task": {
		{`{}`, wantBad},
		{`{"task_id":"task_x"}`, wantOK},
		{`{"task_id":" task_x\n"}`, wantOK},
		{`{"task_id":""}`, wantBad},
		{`{"task_id":" \t\n"}`, wantBad},
		{`{"task_id":"\u00a0\u2003"}`, wantBad},
		{`{"task_id":null}`, wantBad},
		{`{"task_id":42}`, wantBad},
		{`{"task_id":["task_x"]}`, wantBad},
		{`{"task_id":` + repeatedArg("x", 128) + `}`, wantOK},
		{`{"task_id":` + repeatedArg("x", 129) + `}`, wantBadLength},
		{`{"task_id":"task_x","task_id":"task_y"}`, wantOK},
		{`{"task_id":"","task_id":"task_y"}`, wantOK},
		{`{"task_id":"task_x","task_id":null}`, wantBad},
		{`{"task_id":"task_x","task_id":" "}`, wantBad},
		{`{"Task_ID":"task_x"}`, wantBad},
		{`{"task_id":"task_x","foo":null}`, wantBad},
		{`{"task_id":"task_x","output_since":0}`, wantOK},
		{`{"task_id":"task_x","output_since":1234,"output_tail":null}`, wantOK},
		{`{"task_id":"task_x","output_since":null,"output_tail":1}`, wantOK},
		{`{"task_id":"task_x","output_tail":8192}`, wantOK},
		{`{"task_id":"task_x","output_tail":8193}`, wantBadRange},
		{`{"task_id":"task_x","output_tail":0}`, wantBadRange},
		{`{"task_id":"task_x","output_since":-1}`, wantBadRange},
		{`{"task_id":"task_x","output_since":1e400}`, wantBadRange},
		{`{"task_id":"task_x","output_since":1.5}`, wantBad},
		{`{"task_id":"task_x","output_since":"0"}`, wantBad},
		{`{"task_id":"task_x","output_tail":true}`, wantBad},
		{`{"task_id":"task_x","output_since":0,"output_tail":10}`, wantBadRelation},
		{`{"task_id":"task_x","output_offset":0}`, wantBad},
	},
	"cancel_task": {
		{`{}`, wantBad},
		{`{"target":{"relation":"self"}}`, wantOK},
		{`{"target":{"relation":"self","name":null}}`, wantOK},
		{`{"target":{"relation":"self","name":"x"}}`, wantBadRelation},
		{`{"target":{"relation":"self","name":""}}`, wantBad},
		{`{"target":{"relation":"child","name":"crawler"}}`, wantOK},
		{`{"target":{"relation":"child","name":" crawler "}}`, wantOK},
		{`{"target":{"relation":"child","name":""}}`, wantBad},
		{`{"target":{"relation":"child","name":"  "}}`, wantBad},
		{`{"target":{"relation":"child","name":"\u3000"}}`, wantBad},
		{`{"target":{"relation":"child","name":null}}`, wantBadRelation},
		{`{"target":{"relation":"child"}}`, wantBadRelation},
		{`{"target":{"relation":"child","name":7}}`, wantBad},
		{`{"target":{"relation":"child","name":` + repeatedArg("n", 128) + `}}`, wantOK},
		{`{"target":{"relation":"child","name":` + repeatedArg("n", 129) + `}}`, wantBadLength},
		{`{"target":{"relation":"parent"}}`, wantBad},
		{`{"target":{"relation":" self"}}`, wantBad},
		{`{"target":{"relation":null}}`, wantBad},
		{`{"target":{}}`, wantBad},
		{`{"target":null}`, wantBad},
		{`{"target":"self"}`, wantBad},
		{`{"target":[]}`, wantBad},
		{`{"target":{"relation":"self","extra":1}}`, wantBad},
		{`{"target":{"relation":"self"},"target":{"relation":"child","name":"w"}}`, wantOK},
		{`{"target":{"relation":"child","name":"w","name":"v"}}`, wantOK},
		{`{"target":{"relation":"child","name":"w","relation":"self"}}`, wantBadRelation},
		{`{"target":{"relation":"self"},"task_id":"task_x"}`, wantBad},
		{`{"target":{"relation":"self"},"reason":"  "}`, wantBad},
		{`{"target":{"relation":"self"},"reason":""}`, wantBad},
		{`{"target":{"relation":"self"},"reason":null}`, wantOK},
		{`{"target":{"relation":"self"},"reason":" stop "}`, wantOK},
		{`{"target":{"relation":"self","name":null}}`, wantOK},
		{`{"target":{"relation":"child","name":"crawler"}}`, wantOK},
		{`{"target":{"relation":"self","name":"crawler"}}`, wantBadRelation},
		{`{"target":{"relation":"child","name":null}}`, wantBadRelation},
		{`{"target":{"relation":null,"name":null}}`, wantBad},
	},
	"send_message": {
		{`{}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi"}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":" hi "}`, wantOK},
		{`{"to":{"relation":"parent"},"message":"done"}`, wantOK},
		{`{"to":{"relation":"parent","name":null},"message":"done"}`, wantOK},
		{`{"to":{"relation":"parent","name":"boss"},"message":"done"}`, wantBadRelation},
		{`{"to":{"relation":"child"},"message":"hi"}`, wantBadRelation},
		{`{"to":{"relation":"child","name":""},"message":"hi"}`, wantBad},
		{`{"to":{"relation":"child","name":" "},"message":"hi"}`, wantBad},
		{`{"to":{"relation":"self"},"message":"hi"}`, wantBad},
		{`{"to":"worker","message":"hi"}`, wantBad},
		{`{"to":null,"message":"hi"}`, wantBad},
		{`{"message":"hi"}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"}}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":null}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":""}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":" \n\t"}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"\u2028\u00a0"}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":5}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":{"text":"hi"}}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":` + repeatedArg("m", 16384) + `}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":` + repeatedArg("€", 16384) + `}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":` + repeatedArg("m", 16385) + `}`, wantBadLength},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":"input_1"}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":""}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":" "}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":1}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + repeatedArg("i", 128) + `}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + repeatedArg("i", 129) + `}`, wantBadLength},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":"input_1"}`, wantBadRelation},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":null}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","message":"ho"}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"","message":"ho"}`, wantOK},
		{`{"to":{"relation":"parent"},"to":{"relation":"child","name":"w"},"message":"hi","in_reply_to":"input_1"}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","content":"hi"}`, wantBad},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":null}`, wantOK},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":"input_1"}`, wantOK},
		{`{"to":{"relation":"parent","name":null},"message":"done","in_reply_to":null}`, wantOK},
		{`{"to":{"relation":"parent","name":null},"message":"done","in_reply_to":"input_1"}`, wantBadRelation},
		{`{"to":{"relation":"parent","name":"boss"},"message":"done","in_reply_to":null}`, wantBadRelation},
		{`{"to":{"relation":"child","name":null},"message":"hi","in_reply_to":null}`, wantBadRelation},
		{`{"to":{"relation":"child","name":"worker"},"message":null,"in_reply_to":null}`, wantBad},
	},
	"wait_task": {
		{`{}`, wantBad},
		{`{"timeout_seconds":5}`, wantBad},
		{`{"task_id":"task_x"}`, wantOK},
		{`{"task_id":""}`, wantBad},
		{`{"task_id":"\u2003"}`, wantBad},
		{`{"task_id":` + repeatedArg("x", 129) + `}`, wantBadLength},
		{`{"task_id":"task_x","timeout_seconds":1}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":300}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":30.0}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":3e1}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":3.0e+2}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":null}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":0}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":-5}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":301}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":1.5}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":1e400}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":99999999999999999999}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":1.0000000000000001}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":300.00000000000001}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":"30"}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":true}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":5,"timeout_seconds":6}`, wantOK},
		{`{"task_id":"task_x","timeout":30}`, wantBad},
		{`{"task_id":null,"timeout_seconds":null}`, wantBad},
		{`{"task_id":"task_x","timeout_seconds":5,"output_since":0}`, wantOK},
		{`{"task_id":"task_x","output_since":77}`, wantOK},
		{`{"task_id":"task_x","output_since":null}`, wantOK},
		{`{"task_id":"task_x","output_since":-3}`, wantBadRange},
		{`{"task_id":"task_x","output_since":2.5}`, wantBad},
		{`{"task_id":"task_x","output_since":[0]}`, wantBad},
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
	for _, tool := range Tools(m.Owner("thread-1")) {
		t.Run(tool.Name, func(t *testing.T) {
			s, decode := compileSchema(t, tool), argDecoders[tool.Name]
			rows := append(append([]verdict{}, everyToolRows...), schemaRows[tool.Name]...)
			for _, row := range rows {
				args := shortText(row.args)
				decErr := decode([]byte(row.args))
				switch {
				case (decErr == nil) != (row.want == wantOK):
					t.Errorf("%s: decoder accepts %v (%v); want %v", args, decErr == nil, decErr, row.want == wantOK)
				case row.want > wantBad && !gapError.MatchString(decErr.Error()):
					t.Errorf("%s: decoder error %q is not one a schema cannot say", args, decErr)
				}
				schemaOK, schemaErr := schemaAccepts(s, row.args)
				filled, added, isObject := fillNulls(tool.Schema, row.args)
				if !isObject {
					if schemaOK {
						t.Errorf("%s: schema accepts what is not one JSON object", args)
					}
					continue
				}
				if added && schemaOK {
					t.Errorf("%s: schema accepts a call that leaves a key out", args)
				}
				filledOK, filledErr := schemaAccepts(s, filled)
				if !added && filledOK != schemaOK {
					t.Errorf("%s: schema accepts %v, re-encoded %v", args, schemaOK, filledOK)
				}
				if want := row.want != wantBad; filledOK != want {
					t.Errorf("%s with every key: schema accepts %v (%v, %v); want %v", args, filledOK, schemaErr, filledErr, want)
				}
				if fillErr := decode([]byte(filled)); fmt.Sprint(fillErr) != fmt.Sprint(decErr) {
					t.Errorf("%s with every key: decoder says %v, without %v", args, fillErr, decErr)
				}
			}
		})
	}
}

// fillNulls reads args as one JSON object and returns it with every key that
// the schema lists and args leaves out given as null, in nested objects
// too, and whether it added any. isObject is false if args is not one
// JSON object. A key given twice keeps its last value, as both the
// decoder and the validator read it.
func fillNulls(schema json.RawMessage, args string) (filled string, added, isObject bool) {
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
	added = fillObjectNulls(obj, sch)
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b), added, true
}

func fillObjectNulls(obj, schema map[string]any) (added bool) {
	props, _ := schema["properties"].(map[string]any)
	for key, ps := range props {
		v, ok := obj[key]
		if !ok {
			obj[key], added = nil, true
			continue
		}
		nested, isObj := v.(map[string]any)
		if nestedSchema, hasSchema := ps.(map[string]any); isObj && hasSchema && fillObjectNulls(nested, nestedSchema) {
			added = true
		}
	}
	return added
}

// TestWaitTaskSchemaWithLimit: the decoder follows WithWaitLimit, and the
// schema's description says the limit (strict mode has no maximum).
func TestWaitTaskSchemaWithLimit(t *testing.T) {
	m := newTestManager(t)
	tool := toolNamed(t, m.Owner("thread-1"), "wait_task", WithWaitLimit(10*time.Second))
	s := compileSchema(t, tool)
	for _, row := range []verdict{
		{`{"task_id":"task_x","timeout_seconds":10,"output_since":null}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":1e1,"output_since":null}`, wantOK},
		{`{"task_id":"task_x","timeout_seconds":11,"output_since":null}`, wantBadRange},
		{`{"task_id":"task_x","timeout_seconds":300,"output_since":null}`, wantBadRange},
	} {
		schemaOK, _ := schemaAccepts(s, row.args)
		_, decErr := decodeWaitArgs([]byte(row.args), 10)
		if schemaOK != (row.want != wantBad) || (decErr == nil) != (row.want == wantOK) {
			t.Errorf("%s: schema accepts %v, decoder accepts %v (%v); want %v", row.args, schemaOK, decErr == nil, decErr, row.want)
		}
		if row.want == wantBadRange && decErr.Error() != `invalid arguments: "timeout_seconds" must be from 1 to 10` {
			t.Errorf("%s: decoder error %v", row.args, decErr)
		}
	}
}

// shortText shortens a long row for an error message.
func shortText(s string) string {
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
	tools := Tools(m.Owner("thread-1"))
	schemas := make([]*jsonschema.Schema, len(tools))
	for i, tool := range tools {
		schemas[i] = compileSchema(f, tool)
		for _, row := range schemaRows[tool.Name] {
			f.Add(row.args)
		}
	}
	hugeExp := regexp.MustCompile(`[eE][+-]?[0-9]{5}`)
	f.Fuzz(func(t *testing.T, args string) {
		if hugeExp.MatchString(args) {
			t.Skip()
		}
		for i, tool := range tools {
			schemaOK, schemaErr := schemaAccepts(schemas[i], args)
			decErr := argDecoders[tool.Name]([]byte(args))
			switch {
			case schemaOK && decErr != nil && !gapError.MatchString(decErr.Error()):
				t.Errorf("%s(%q): schema accepts, decoder refuses with %v, a rule the schema can say", tool.Name, args, decErr)
			case !schemaOK && decErr == nil:
				filled, added, _ := fillNulls(tool.Schema, args)
				if ok, err := schemaAccepts(schemas[i], filled); !added || !ok {
					t.Errorf("%s(%q): decoder accepts, schema refuses (%v), with every key given too (%v)", tool.Name, args, schemaErr, err)
				}
			}
		}
	})
}
