package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// get_task shows every open input request of a task that asked several at
// once: the oldest as input_request, the others in more_input_requests,
// each answerable with send_message by its id.
func TestGetTaskSeveralInputRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		start := []chan struct{}{make(chan struct{}), make(chan struct{})}
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
			var wg sync.WaitGroup
			answers := make([]string, 2)
			for i, p := range []string{"first?", "second?"} {
				wg.Go(func() {
					<-start[i]
					msg, _ := tk.RequestInput(ctx, p)
					answers[i] = msg.Content
				})
			}
			wg.Wait()
			return answers, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range start { // one after the other: their order is known
			close(c)
			synctest.Wait()
		}
		var got struct {
			Task     map[string]json.RawMessage `json:"task"`
			Messages json.RawMessage            `json:"messages"`
		}
		callTool(t, t.Context(), toolNamed(t, o, "get_task"), fmt.Sprintf(`{"task_id":%q}`, id), &got)
		var first bgtype.InputRequest
		var more []bgtype.InputRequest
		if err := json.Unmarshal(got.Task["input_request"], &first); err != nil || first.Prompt != "first?" {
			t.Fatalf("input_request %s", got.Task["input_request"])
		}
		if err := json.Unmarshal(got.Task["more_input_requests"], &more); err != nil || len(more) != 1 || more[0].Prompt != "second?" || more[0].ID == first.ID {
			t.Fatalf("more_input_requests %s", got.Task["more_input_requests"])
		}
		for _, in := range []bgtype.InputRequest{more[0], first} {
			if _, err := o.Send(t.Context(), id, bgtype.Message{Content: "re " + in.Prompt, InReplyTo: in.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if end, err := o.Wait(t.Context(), id); err != nil || end.Status != bgtype.StatusCompleted || string(end.Result) != `["re first?","re second?"]` {
			t.Fatalf("end %+v %v", end, err)
		}
	})
}
