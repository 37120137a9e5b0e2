package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each provider's rules for a tool's argument schema, as its documentation
// states them (November 2026), checked on every tool's schema. A rule
// checks one subschema at a time; a failure names the tool, the rule and
// the path ("#/properties/target/properties/name").

// schemaNode is one subschema met by walkSchema.
type schemaNode struct {
	path  string
	root  bool
	depth int // objects enclosing it, itself included
	s     map[string]any
}

// schemaRule is one rule of a provider: check returns what is wrong with the
// node, or "" when it follows the rule.
type schemaRule struct {
	name  string
	check func(n schemaNode) string
}

// walkSchema calls f on the schema and each of its subschemas (properties,
// items, anyOf, $defs), in a fixed order.
func walkSchema(s map[string]any, path string, depth int, f func(schemaNode)) {
	if s["properties"] != nil || s["type"] == "object" || s["type"] == "OBJECT" {
		depth++
	}
	f(schemaNode{path: path, root: path == "#", depth: depth, s: s})
	for _, key := range []string{"properties", "$defs"} {
		sub, _ := s[key].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(sub)) {
			if c, ok := sub[name].(map[string]any); ok {
				walkSchema(c, path+"/"+key+"/"+name, depth, f)
			}
		}
	}
	if c, ok := s["items"].(map[string]any); ok {
		walkSchema(c, path+"/items", depth, f)
	}
	alts, _ := s["anyOf"].([]any)
	for i, a := range alts {
		if c, ok := a.(map[string]any); ok {
			walkSchema(c, fmt.Sprintf("%s/anyOf/%d", path, i), depth, f)
		}
	}
}

// checkRules walks schema and reports every node that breaks a rule.
func checkRules(t *testing.T, tool string, schema json.RawMessage, rules []schemaRule) {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("%s: schema: %v", tool, err)
	}
	walkSchema(s, "#", 0, func(n schemaNode) {
		for _, r := range rules {
			if msg := r.check(n); msg != "" {
				t.Errorf("%s: %s: rule %q: %s", tool, n.path, r.name, msg)
			}
		}
	})
}

// nodeKeywords returns the node's keywords that are not in allowed.
func nodeKeywords(n schemaNode, allowed ...string) string {
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(n.s)) {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "has " + strings.Join(bad, ", ")
}

// nodeTypes returns the node's type names: one, or a list.
func nodeTypes(n schemaNode) []string {
	switch typ := n.s["type"].(type) {
	case string:
		return []string{typ}
	case []any:
		var out []string
		for _, e := range typ {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func isObjectNode(n schemaNode) bool {
	return slices.Contains(nodeTypes(n), "object") || n.s["properties"] != nil
}

// nodePropertyNames returns the node's property names, sorted.
func nodePropertyNames(n schemaNode) []string {
	props, _ := n.s["properties"].(map[string]any)
	return slices.Sorted(maps.Keys(props))
}

// stringSize is the size OpenAI counts against its limit: property
// names, enum values and const values.
func stringSize(n schemaNode) int {
	size := 0
	for _, name := range nodePropertyNames(n) {
		size += len(name)
	}
	enum, _ := n.s["enum"].([]any)
	for _, v := range append(enum, n.s["const"]) {
		if s, ok := v.(string); ok {
			size += len(s)
		}
	}
	return size
}

// openAIStrictRules are the rules of OpenAI's strict mode ("strict": true on a
// function tool; Structured Outputs' supported schemas).
var openAIStrictRules = []schemaRule{
	{"the root is an object, not anyOf", func(n schemaNode) string {
		if n.root && (n.s["type"] != "object" || n.s["anyOf"] != nil) {
			return fmt.Sprintf("type %v, anyOf %v", n.s["type"], n.s["anyOf"] != nil)
		}
		return ""
	}},
	// Not supported: allOf, oneOf, not, if/then/else, dependentRequired,
	// dependentSchemas; for strings minLength, maxLength; for objects
	// patternProperties, unevaluatedProperties, propertyNames,
	// minProperties, maxProperties; for arrays unevaluatedItems, contains,
	// minContains, maxContains, uniqueItems.
	{"only keywords of the strict subset", func(n schemaNode) string {
		return nodeKeywords(n, "type", "description", "title", "properties", "required", "additionalProperties",
			"items", "enum", "const", "anyOf", "$ref", "$defs", "pattern", "format",
			"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems")
	}},
	{"additionalProperties is false on every object", func(n schemaNode) string {
		if isObjectNode(n) && n.s["additionalProperties"] != false {
			return fmt.Sprintf("additionalProperties %v", n.s["additionalProperties"])
		}
		return ""
	}},
	{"every property is required (an optional one is nullable)", func(n schemaNode) string {
		var required []string
		req, _ := n.s["required"].([]any)
		for _, r := range req {
			s, _ := r.(string)
			required = append(required, s)
		}
		slices.Sort(required)
		if props := nodePropertyNames(n); isObjectNode(n) && !slices.Equal(props, required) {
			return fmt.Sprintf("properties %v, required %v", props, required)
		}
		return ""
	}},
	{"a type is one JSON type, or one and null", func(n schemaNode) string {
		types := nodeTypes(n)
		valid := []string{"string", "number", "integer", "boolean", "object", "array", "null"}
		switch {
		case n.s["type"] == nil && n.s["anyOf"] == nil && n.s["enum"] == nil && n.s["const"] == nil && n.s["$ref"] == nil:
			return "no type"
		case len(types) == 1 && slices.Contains(valid, types[0]):
		case len(types) == 2 && slices.Contains(valid, types[0]) && types[0] != "null" && types[1] == "null":
		case len(types) > 0:
			return fmt.Sprintf("type %v", types)
		}
		return ""
	}},
	{"a format is one of the supported ones", func(n schemaNode) string {
		if f, ok := n.s["format"]; ok && !slices.Contains([]any{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}, f) {
			return fmt.Sprintf("format %v", f)
		}
		return ""
	}},
	// The limits as first published, below the current ones (10 levels,
	// 5000 properties, 1000 enum values, 120,000 characters).
	{"at most 5 levels of nested objects", func(n schemaNode) string {
		if n.depth > 5 {
			return fmt.Sprintf("level %d", n.depth)
		}
		return ""
	}},
	{"at most 100 properties and 500 enum values, 15,000 characters of names and values", func(n schemaNode) string {
		if !n.root {
			return ""
		}
		props, enums, size := 0, 0, 0
		walkSchema(n.s, "#", 0, func(c schemaNode) {
			props += len(nodePropertyNames(c))
			enum, _ := c.s["enum"].([]any)
			enums += len(enum)
			size += stringSize(c)
		})
		if props > 100 || enums > 500 || size > 15_000 {
			return fmt.Sprintf("%d properties, %d enum values, %d characters", props, enums, size)
		}
		return ""
	}},
}

// anthropic are the rules of Anthropic's tool input_schema.
var anthropicRules = []schemaRule{
	{"input_schema is an object schema", func(n schemaNode) string {
		if n.root && n.s["type"] != "object" {
			return fmt.Sprintf("type %v", n.s["type"])
		}
		return ""
	}},
	{"no oneOf, allOf or anyOf at the top level", func(n schemaNode) string {
		if n.root {
			return keywordsPresent(n, "oneOf", "allOf", "anyOf")
		}
		return ""
	}},
	{"property keys match ^[a-zA-Z0-9_.-]{1,64}$", func(n schemaNode) string {
		for _, name := range nodePropertyNames(n) {
			if !anthropicKey.MatchString(name) {
				return fmt.Sprintf("key %q", name)
			}
		}
		return ""
	}},
	// And it is JSON Schema draft 2020-12: compileSchema checks the schema
	// against the meta-schema.

	// With strict tool use ("strict": true on the tool):
	{"strict: only supported keywords", func(n schemaNode) string {
		return nodeKeywords(n, "$ref", "$defs", "type", "anyOf", "oneOf", "allOf", "description", "title",
			"enum", "const", "properties", "additionalProperties", "required", "items", "minItems", "format", "pattern")
	}},
	{"strict: additionalProperties is false on every object", func(n schemaNode) string {
		if isObjectNode(n) && n.s["additionalProperties"] != false {
			return fmt.Sprintf("additionalProperties %v", n.s["additionalProperties"])
		}
		return ""
	}},
	{"strict: minItems is 0 or 1", func(n schemaNode) string {
		if v, ok := n.s["minItems"]; ok && v != 0.0 && v != 1.0 {
			return fmt.Sprintf("minItems %v", v)
		}
		return ""
	}},
	{"strict: a format is one of the supported ones", func(n schemaNode) string {
		if f, ok := n.s["format"]; ok && !slices.Contains([]any{"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}, f) {
			return fmt.Sprintf("format %v", f)
		}
		return ""
	}},
	{"strict: a pattern has no lookaround, backreference or word boundary", func(n schemaNode) string {
		if p, ok := n.s["pattern"].(string); ok && unsupportedRegexp.MatchString(p) {
			return fmt.Sprintf("pattern %q", p)
		}
		return ""
	}},
}

// unsupportedRegexp finds what Anthropic's strict mode refuses in a
// pattern: (?= (?! (?<= (?<! \1 \b \B.
var unsupportedRegexp = regexp.MustCompile(`\(\?<?[=!]|\\[1-9bB]`)

var anthropicKey = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// keywordsPresent returns which of keys the node has.
func keywordsPresent(n schemaNode, keys ...string) string {
	var has []string
	for _, k := range keys {
		if _, ok := n.s[k]; ok {
			has = append(has, k)
		}
	}
	if len(has) == 0 {
		return ""
	}
	return "has " + strings.Join(has, ", ")
}

// gemini are the rules of a Gemini function declaration's "parameters":
// its subset of the OpenAPI 3.0 schema object.
var geminiRules = []schemaRule{
	{"only fields of Gemini's Schema", func(n schemaNode) string {
		return nodeKeywords(n, "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
			"properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
			"example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum")
	}},
	{"type is one of STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT", func(n schemaNode) string {
		if !slices.Contains([]any{"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}, n.s["type"]) {
			return fmt.Sprintf("type %v", n.s["type"])
		}
		return ""
	}},
	{"the parameters are an OBJECT", func(n schemaNode) string {
		if n.root && n.s["type"] != "OBJECT" {
			return fmt.Sprintf("type %v", n.s["type"])
		}
		return ""
	}},
	{"nullable is true or absent", func(n schemaNode) string {
		if v, ok := n.s["nullable"]; ok && v != true {
			return fmt.Sprintf("nullable %v", v)
		}
		return ""
	}},
	{"enum lists strings of a STRING", func(n schemaNode) string {
		enum, ok := n.s["enum"].([]any)
		if !ok {
			return ""
		}
		if n.s["type"] != "STRING" {
			return fmt.Sprintf("enum on type %v", n.s["type"])
		}
		for _, v := range enum {
			if _, ok := v.(string); !ok {
				return fmt.Sprintf("enum value %v", v)
			}
		}
		return ""
	}},
	{"an ARRAY has items", func(n schemaNode) string {
		if n.s["type"] == "ARRAY" && n.s["items"] == nil {
			return "no items"
		}
		return ""
	}},
	{"required names properties", func(n schemaNode) string {
		req, _ := n.s["required"].([]any)
		props, _ := n.s["properties"].(map[string]any)
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				return fmt.Sprintf("required %v is no property", r)
			}
		}
		return ""
	}},
}

// functionNames are the providers' rules for a tool's name.
var functionNames = map[string]*regexp.Regexp{
	"OpenAI":    regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
	"Anthropic": regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`),
	"Gemini":    regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`),
}

// providerTools are the tools the rules are checked on: the defaults,
// wait_task with the smallest limit, and a host's strict tool that
// Background gave run_in_background.
func providerTools(t *testing.T) []Tool {
	m := newTestManager(t)
	tools := Tools(m.Owner("thread-1"))
	bt, err := Background(m.Owner("thread-1"), newScriptedBuild().tool(), BackgroundOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return append(tools, toolNamed(t, m.Owner("thread-1"), "wait_task", WithWaitLimit(time.Second)), bt)
}

func checkToolName(t *testing.T, provider, name string) {
	t.Helper()
	if !functionNames[provider].MatchString(name) {
		t.Errorf("%s: rule %q: name %q", name, provider+" function name "+functionNames[provider].String(), name)
	}
}

// TestToolSchemasOpenAIStrict: every tool's Schema is accepted as it is
// by OpenAI's strict mode.
func TestToolSchemasOpenAIStrict(t *testing.T) {
	for _, tool := range providerTools(t) {
		checkToolName(t, "OpenAI", tool.Name)
		checkRules(t, tool.Name, tool.Schema, openAIStrictRules)
	}
}

// TestToolSchemasAnthropic: every tool's Schema is accepted as it is as
// Anthropic's input_schema, with strict tool use too.
func TestToolSchemasAnthropic(t *testing.T) {
	for _, tool := range providerTools(t) {
		checkToolName(t, "Anthropic", tool.Name)
		compileSchema(t, tool) // JSON Schema 2020-12
		checkRules(t, tool.Name, tool.Schema, anthropicRules)
	}
}

// TestToolSchemasGemini: every tool's GeminiParameters is accepted as a
// Gemini function declaration's parameters, and says what Schema says but
// additionalProperties.
func TestToolSchemasGemini(t *testing.T) {
	for _, tool := range providerTools(t) {
		checkToolName(t, "Gemini", tool.Name)
		params, err := tool.GeminiParameters()
		if err != nil {
			t.Fatalf("%s: GeminiParameters: %v", tool.Name, err)
		}
		checkRules(t, tool.Name, params, geminiRules)

		var back, want map[string]any
		if err := json.Unmarshal(params, &back); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if err := json.Unmarshal(tool.Schema, &want); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		walkSchema(back, "#", 0, func(n schemaNode) { // back to JSON Schema
			typ := strings.ToLower(n.s["type"].(string))
			n.s["type"] = any(typ)
			if n.s["nullable"] == true {
				n.s["type"] = []any{typ, "null"}
				delete(n.s, "nullable")
			}
			if typ == "object" {
				n.s["additionalProperties"] = false
			}
		})
		if !reflect.DeepEqual(back, want) {
			t.Errorf("%s: GeminiParameters read back\n%v\nwant\n%v", tool.Name, back, want)
		}
	}
}

// TestGeminiParametersRefuses: a schema outside the subset is an error
// that names the tool and the path.
func TestGeminiParametersRefuses(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":["string","integer"]}}}`,
			`bgtask: x: schema: #/properties/a: type [string integer]: Gemini takes one type, or one and null`},
		{`{"type":"object","additionalProperties":{"type":"string"}}`,
			`bgtask: x: schema: #: additionalProperties map[type:string]: Gemini has none`},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":["null","string"]}}}}`,
			`bgtask: x: schema: #/properties/a/items: type [null string]: Gemini takes one type, or one and null`},
		{`{"type":`, `bgtask: x: schema: unexpected EOF`},
	} {
		_, err := Tool{Name: "x", Schema: json.RawMessage(tc.schema)}.GeminiParameters()
		if fmt.Sprint(err) != tc.want {
			t.Errorf("%s: error %v, want %s", tc.schema, err, tc.want)
		}
	}
}
