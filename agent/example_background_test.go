package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// A host lets the model choose, per call, whether its tool runs in the
// background: Background adds run_in_background to the schema. In the
// foreground the call waits (promoted after Wait) and its output streams
// to the host's screen; in the background it returns a task id at once,
// the end is announced, and the model reads the output it wants with
// get_task, from an offset.
func ExampleBackground() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")

	builder := agent.Tool{ // a tool of your own
		Name:        "build",
		Description: "Builds a target.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["target"],"properties":{"target":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Target string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			out := bgtask.OutputFrom(ctx) // its task's output, kept and read by offset
			fmt.Fprintf(out, "compiling %s\n", in.Target)
			fmt.Fprintf(out, "linking %s\n", in.Target)
			return json.Marshal(map[string]string{"built": in.Target})
		},
	}
	tool, err := agent.Background(owner, builder, agent.BackgroundOptions{
		Wait: 30 * time.Second, // a foreground call is promoted after 30 s
		OnOutput: func(ctx context.Context, offset int64, p []byte) {
			fmt.Printf("screen: %q\n", p) // what a foreground call prints, as it prints it
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	tools := append(agent.Tools(owner), tool) // to an adapter, as any tools

	// The model's calls, as an adapter makes them:
	res, _ := tool.Call(ctx, json.RawMessage(`{"target":"lib","run_in_background":false}`))
	fmt.Println("foreground:", string(res))
	res, _ = tool.Call(ctx, json.RawMessage(`{"target":"app","run_in_background":true}`))
	var started struct {
		Status string `json:"status"`
		TaskID string `json:"task_id"`
	}
	json.Unmarshal(res, &started)
	fmt.Println("background:", started.Status)
	owner.Wait(ctx, started.TaskID)                                                                   // its end reaches the owner as an event
	res, _ = tools[1].Call(ctx, json.RawMessage(`{"task_id":"`+started.TaskID+`","output_since":0}`)) // get_task
	var got struct {
		Output struct {
			Text       string `json:"text"`
			NextOffset int64  `json:"next_offset"`
		} `json:"output"`
	}
	json.Unmarshal(res, &got)
	fmt.Printf("get_task output: %q, next_offset %d\n", got.Output.Text, got.Output.NextOffset)
	// Output:
	// screen: "compiling lib\n"
	// screen: "linking lib\n"
	// foreground: {"built":"lib"}
	// background: started
	// get_task output: "compiling app\nlinking app\n", next_offset 26
}
