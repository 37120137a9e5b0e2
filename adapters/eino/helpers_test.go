package bgeino_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/bgtask/bgtask"
)

// fixture is an owner with two real tasks: "fetch", completed with
// {"rows":42}, and "crawler", running in run-1 until it is cancelled.
type fixture struct {
	m       *bgtask.Manager
	owner   bgtask.Owner
	callCtx context.Context // a tool call's ctx in run-1
	fetch   string
	crawler string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := t.Context()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	f := fixture{m: m, owner: m.Owner("thread-1"), callCtx: bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1"})}
	f.fetch, err = f.owner.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return map[string]int{"rows": 42}, nil
	}, bgtask.WithName("fetch"), bgtask.WithDescription("fetch the feed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.owner.Wait(ctx, f.fetch); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	f.crawler, err = f.owner.Spawn(f.callCtx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}, bgtask.WithName("crawler"))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	return f
}

// direct calls the owner's tool name with args, as the expected answer.
func (f fixture) direct(t *testing.T, name, args string) string {
	t.Helper()
	for _, tool := range f.owner.Tools() {
		if tool.Name == name {
			res, err := tool.Call(f.callCtx, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return string(res)
		}
	}
	t.Fatalf("no tool %s", name)
	return ""
}

// checkCrawlerCancelled checks the crawler ended cancelled.
func (f fixture) checkCrawlerCancelled(t *testing.T) {
	t.Helper()
	meta, err := f.owner.Wait(t.Context(), f.crawler)
	if err != nil || meta.Status != bgtask.StatusCancelled {
		t.Fatalf("crawler: %v %v, want cancelled", meta.Status, err)
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return errors.Join(err1, err2) == nil && bytes.Equal(x, y)
}
