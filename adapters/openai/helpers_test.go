package bgopenai_test

import (
	"encoding/json"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/internal/adaptertest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// newScriptedModel starts a scripted model server answering path with
// replies, and a client of the SDK that talks to it.
func newScriptedModel(t *testing.T, path string, replies ...string) (*adaptertest.ScriptedModel, openai.Client) {
	t.Helper()
	sm := adaptertest.NewScriptedModel(t, path, replies...)
	client := openai.NewClient(option.WithBaseURL(sm.Server.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(sm.Server.Client()), option.WithMaxRetries(0))
	return sm, client
}

// checkDefinitions checks that defs, the tool definitions a request sent
// (as decoded JSON), are the owner's tools in order, each with its
// description and its schema (as JSON values, whatever their key order),
// and strict as wantStrict. get picks a definition's name, description, parameters
// and strict flag.
func checkDefinitions(t *testing.T, owner bgtask.Owner, wantStrict bool, defs []any, get func(def map[string]any) (name, desc string, params, strict any)) {
	t.Helper()
	tools := owner.Tools()
	if len(defs) != len(tools) {
		t.Fatalf("%d tool definitions sent, want %d", len(defs), len(tools))
	}
	for i, tool := range tools {
		def, _ := defs[i].(map[string]any)
		name, desc, params, strict := get(def)
		var want any
		if err := json.Unmarshal(tool.Schema, &want); err != nil {
			t.Fatal(err)
		}
		if name != tool.Name || desc != tool.Description || !adaptertest.JSONEqual(params, want) || strict != wantStrict {
			t.Errorf("definition %d: name %q, description equal %v, schema equal %v, strict %v; want %s, its schema, strict %v",
				i, name, desc == tool.Description, adaptertest.JSONEqual(params, want), strict, tool.Name, wantStrict)
		}
	}
}
