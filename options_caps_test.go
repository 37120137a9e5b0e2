package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// TestSizeCaps: results, error texts and stacks, payloads (and the kept
// progress), prompts and messages are cut to their caps, in the record and
// the events, with a marker and the original size.
func TestSizeCaps(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithCaps(Caps{MaxResultBytes: 80, MaxErrorBytes: 40, MaxPayloadBytes: 80, MaxPromptBytes: 40, MaxMessageBytes: 40}))
	o := m.Owner("thread-1")
	ctx := t.Context()
	long := func(c string) string { return strings.Repeat(c, 100) }
	wantJSON := `{"truncated":true,"original_bytes":102,"preview":"\"` + strings.Repeat("a", 26) + `"}`
	cut := func(c string) string { return strings.Repeat(c, 9) + "…[truncated: 100 bytes total]" }

	// Result, payload and kept progress, prompt.
	asked := make(chan struct{})
	resID, err := o.Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
		if err := tk.Emit("progress", long("a")); err != nil {
			return nil, err
		}
		close(asked)
		if _, err := tk.RequestInput(ctx, long("p")); err != nil {
			return nil, err
		}
		return long("a"), nil
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	meta, err := m.waitSettled(ctx, ownerReach("thread-1"), resID)
	if err != nil || meta.Input == nil || meta.Input.Prompt != cut("p") {
		t.Fatalf("awaiting input: %+v, %v", meta.Input, err)
	}
	if p, ok := o.LatestEvent(resID); !ok || string(p.Payload) != wantJSON {
		t.Fatalf("Progress = %s, %v", p.Payload, ok)
	}
	if _, err := o.Send(ctx, resID, bgtype.Message{InReplyTo: meta.Input.ID, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, resID); string(got.Result) != wantJSON {
		t.Fatalf("record result %s\nwant %s", got.Result, wantJSON)
	}

	// Error text and stack.
	errID, err := o.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, errors.New(long("e")) })
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, errID); got.Error != cut("e") {
		t.Fatalf("record error %q", got.Error)
	}
	panicID, err := o.Spawn(ctx, func(context.Context, *Task) (any, error) { panic(long("x")) })
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, panicID); len(got.Error) > 40 || !strings.HasPrefix(got.Error, "panic: xx") ||
		!strings.HasSuffix(got.Error, "…[truncated: 107 bytes total]") || len(got.Stack) > 40 || !strings.Contains(got.Stack, "…[truncated: ") {
		t.Fatalf("record of a panic: error %q, stack %q", got.Error, got.Stack)
	}

	// Messages both ways: the owner's to a sub-agent, the sub-agent's to its owner.
	heard := make(chan bgtype.Message, 1)
	agentID, err := o.SpawnAgent(ctx, func(ctx context.Context, tk *Task) (any, error) {
		if err := tk.Inbox().Wait(ctx); err != nil {
			return nil, err
		}
		msg, _ := tk.Inbox().Drain()[0].Message()
		heard <- msg
		if err := tk.Emit(bgtype.EventTypeMessage, bgtype.Message{From: long("f"), Content: long("r")}); err != nil {
			return nil, err
		}
		return nil, tk.Emit(bgtype.EventTypeMessage, map[string]string{"note": long("n")})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Send(ctx, agentID, bgtype.Message{From: "lead", Content: long("m")}); err != nil {
		t.Fatal(err)
	}
	if msg := <-heard; msg != (bgtype.Message{From: "lead", Content: cut("m")}) {
		t.Fatalf("sub-agent heard %+v", msg)
	}
	waitTask(t, o, agentID)

	var got []string
	for _, ev := range drainOwner(t, o) {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	ev := func(id, rest string) string {
		return `{"kind":` + rest[:strings.Index(rest, ",")] + `,"task_id":"` + id + `"` + rest[strings.Index(rest, ","):]
	}
	want := []string{
		ev(resID, `"custom","event_type":"progress","payload":`+wantJSON+`}`),
		ev(resID, `"input_requested","input_request":{"id":"`+meta.Input.ID+`","prompt":"`+cut("p")+`"}}`),
		ev(resID, `"completed","result":`+wantJSON+`}`),
		ev(errID, `"failed","error":"`+cut("e")+`","error_kind":"error"}`),
		"", // the panic, checked above
		ev(agentID, `"custom","event_type":"agent_message","payload":{"from":"`+cut("f")+`","content":"`+cut("r")+`"}}`),
		ev(agentID, `"custom","event_type":"agent_message","payload":{"truncated":true,"original_bytes":111,"preview":""}}`),
		ev(agentID, `"completed","result":null}`),
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if want[i] != "" && got[i] != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestSizeCapDefaultResult: with the defaults a 2 MiB result is kept as a
// preview of at most 64 KiB that gives the original size.
func TestSizeCapDefaultResult(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return strings.Repeat("a", 2<<20), nil })
	if err != nil {
		t.Fatal(err)
	}
	meta := waitTask(t, o, id)
	var r struct {
		Truncated     bool   `json:"truncated"`
		OriginalBytes int    `json:"original_bytes"`
		Preview       string `json:"preview"`
	}
	if err := json.Unmarshal(meta.Result, &r); err != nil || len(meta.Result) > 64<<10 || !r.Truncated || r.OriginalBytes != 2<<20+2 ||
		r.Preview != `"`+strings.Repeat("a", len(r.Preview)-1) || len(r.Preview) < 60<<10 {
		t.Fatalf("result of %d bytes: truncated %v, original %d, preview of %d bytes, %v", len(meta.Result), r.Truncated, r.OriginalBytes, len(r.Preview), err)
	}
	evs := drainOwner(t, o)
	if len(evs) != 1 || string(evs[0].Result) != string(meta.Result) {
		t.Fatalf("event result differs from the record's")
	}
}
