package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// GeminiParameters returns the tool's Schema in the form Gemini's function
// declarations take as "parameters" (its subset of the OpenAPI 3.0 schema
// object): type names in capitals ("OBJECT", "STRING"...), "nullable": true
// in place of a null type, and no "additionalProperties", which that
// subset lacks (Call still refuses an unknown key). Everything else is kept
// as it is.
//
// It reads the subset of JSON Schema the bgtask tools use; a Schema with a
// type list other than one type and null, or an "additionalProperties"
// other than false, is an error, as is one that is not valid JSON. It does
// not change t and is safe for concurrent use.
func (t Tool) GeminiParameters() (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(t.Schema))
	dec.UseNumber() // numbers as written
	var schema any
	if err := dec.Decode(&schema); err != nil {
		return nil, fmt.Errorf("bgtask: %s: schema: %w", t.Name, err)
	}
	if err := geminiSchema(schema, "#"); err != nil {
		return nil, fmt.Errorf("bgtask: %s: schema: %w", t.Name, err)
	}
	return json.Marshal(schema)
}

// geminiSchema rewrites the JSON Schema v, at path, and its subschemas in
// place into Gemini's form.
func geminiSchema(v any, path string) error {
	s, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	switch typ := s["type"].(type) {
	case string:
		s["type"] = strings.ToUpper(typ)
	case []any:
		if len(typ) != 2 || typ[1] != "null" {
			return fmt.Errorf("%s: type %v: Gemini takes one type, or one and null", path, typ)
		}
		name, _ := typ[0].(string)
		s["type"], s["nullable"] = strings.ToUpper(name), true
	}
	if ap, ok := s["additionalProperties"]; ok {
		if ap != false {
			return fmt.Errorf("%s: additionalProperties %v: Gemini has none", path, ap)
		}
		delete(s, "additionalProperties")
	}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		if err := geminiSchema(p, path+"/properties/"+name); err != nil {
			return err
		}
	}
	if err := geminiSchema(s["items"], path+"/items"); err != nil {
		return err
	}
	alts, _ := s["anyOf"].([]any)
	for i, a := range alts {
		if err := geminiSchema(a, fmt.Sprintf("%s/anyOf/%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}
