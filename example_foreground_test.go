package bgtask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// A tool that cannot know whether its work is fast runs it with
// Owner.Foreground: a quick call returns its result as the tool result; a
// slow one is promoted to a background task, and the tool result tells the
// model its id and how to wait for it. The function runs once either way;
// the promoted one's end reaches the owner's inbox like any task's.
func ExampleOwner_Foreground() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	inbox, err := owner.Inbox()
	if err != nil {
		log.Fatal(err)
	}
	// The tool's call: a search that is quick for some queries, slow for others.
	release := make(chan struct{})
	search := func(ctx context.Context, query string) (json.RawMessage, error) {
		res, err := owner.Foreground(ctx, 100*time.Millisecond, func(ctx context.Context, _ *bgtask.Task) (any, error) {
			if query == "slow" {
				<-release // still going when its foreground time is up
			}
			return []string{query + ".txt"}, nil
		}, bgtask.WithDescription("search "+query))
		return agent.ToolOutput(res.Result, err) // escaped and cut, as the model sees task results
	}

	fast, err := search(ctx, "fast")
	fmt.Println("fast:", string(fast), err)

	slow, err := search(ctx, "slow")
	if err != nil {
		log.Fatal(err)
	}
	var notice struct {
		Status     string `json:"status"`
		TaskID     string `json:"task_id"`
		TaskStatus string `json:"task_status"`
		Message    string `json:"message"`
	}
	if err := json.Unmarshal(slow, &notice); err != nil {
		log.Fatal(err)
	}
	fmt.Println("slow:", notice.Status, notice.TaskStatus, strings.HasPrefix(notice.TaskID, "task_"))
	fmt.Println(strings.ReplaceAll(notice.Message, notice.TaskID, "<id>"))

	close(release) // the promoted search ends later, in the background
	if _, err := owner.Wait(ctx, notice.TaskID); err != nil {
		log.Fatal(err)
	}
	for _, ev := range inbox.Drain() { // only the promoted call is announced
		fmt.Println("event:", ev.Kind, ev.TaskID == notice.TaskID, string(ev.Result))
	}
	// Output:
	// fast: ["fast.txt"] <nil>
	// slow: promoted running true
	// The call was still running after 100ms: it goes on in the background as task <id>. Its result will be announced when it ends; to wait for it now, call wait_task with this task_id.
	// event: completed true ["slow.txt"]
}
