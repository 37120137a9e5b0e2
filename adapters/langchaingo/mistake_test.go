package bglangchain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask"
	bglangchain "github.com/bgtask/bgtask/adapters/langchaingo"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// A host tool's errors that the model caused (a name taken, a reserved
// name, a limit, an error it marks with ModelError) are the tool's result,
// for the model to read; any other error is Call's error.
func TestHostToolErrors(t *testing.T) {
	f := adaptertest.NewFixture(t)
	startJob := bglangchain.New(agent.Tool{
		Name:        "start_job",
		Description: "Start a job.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["name"],"properties":{"name":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Name string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			switch in.Name {
			case "nowhere":
				return nil, fmt.Errorf("start_job: %w", bglangchain.ModelError(errors.New("no such place: nowhere")))
			case "busy":
				return nil, fmt.Errorf("start_job: %w", bgtask.ErrLimit)
			case "down":
				return nil, errors.New("database down")
			}
			_, err := f.Owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return nil, nil }, bgtask.WithName(in.Name))
			return json.RawMessage(`"ok"`), err
		},
	})
	for _, tc := range []struct{ name, want, wantErr string }{
		{"job", `"ok"`, ""},
		{"crawler", `bgtask: a non-terminal task with this name already exists: "crawler"`, ""},
		{"all", `bgtask: invalid argument: task name "all" is reserved`, ""},
		{"nowhere", "start_job: no such place: nowhere", ""},
		{"busy", "start_job: bgtask: concurrency limit reached", ""},
		{"down", "", "bglangchain: start_job: database down"},
	} {
		got, err := startJob.Call(f.CallCtx, `{"name":"`+tc.name+`"}`)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
			t.Errorf("%s: %q, %v; want %q, %q", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
