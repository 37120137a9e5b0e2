package agent

import (
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

func TestPluginDeliversSharedStoreNotices(t *testing.T) {
	f := &fakeShared{Store: memstore.New(), Notices: map[string][]bgtype.Event{
		"thread-1": {{Kind: bgtype.EventInterrupted, TaskID: "task_0190d5f4c5a87000a000000000000001", Error: "reaped"}},
		"thread-2": {{Kind: bgtype.EventInterrupted, TaskID: "task_0190d5f4c5a87000a000000000000002", Error: "reaped"}},
	}}
	pr := newPluginRun(t, bgtask.WithStore(f))
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := `<background-task-event nonce="` + pr.p.nonce + `" kind="interrupted" task_id="task_0190d5f4c5a87000a000000000000001" name="" status="interrupted">{"kind":"interrupted","task_id":"task_0190d5f4c5a87000a000000000000001","error":"reaped"}</background-task-event>`
	if len(msgs) != 1 || msgs[0].Content != want {
		t.Fatalf("delivered %+v, want the owner's one notice", msgs)
	}
	if msgs, _ := pr.p.Deliver(t.Context()); len(msgs) != 0 {
		t.Fatalf("notice delivered twice: %+v", msgs)
	}
}
