package bgmcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// The 2026-07-28 revision is stateless, so a fleet serves it: two servers
// on two Managers (instances a and b) of one PostgreSQL database, and one
// client that alternates between them. tasks/get, tasks/update and
// tasks/cancel answered by the instance that does not run the task reach
// it, and both instances answer the same for every ended task; a result
// over the record cap is whole from the instance that ran it and visibly
// cut from the other; bob reaches none of alice's tasks from either.
func TestModernFleetPostgres(t *testing.T) {
	dsn := pgtest.StartDSN(t)
	tools := newTestTools()
	ask := newAskTool(true)
	const bigLen = 100 << 10 // over the Manager's default Caps.MaxResultBytes (64 KiB)
	big := bgmcp.Tool{Name: "big", Description: "A long result.", InputSchema: echoSchema,
		Run: func(context.Context, *bgmcp.Call) (any, error) { return strings.Repeat("x", bigLen), nil }}
	var urls []string
	for _, name := range []string{"instance-a", "instance-b"} {
		s := newServer(t, pgManager(t, dsn, name), tools, bgmcp.WithOwnerFunc(userOwner))
		for _, tool := range []bgmcp.Tool{ask.tool(), big} {
			if err := s.AddTool(tool); err != nil {
				t.Fatal(err)
			}
		}
		urls = append(urls, modernServer(t, s, true))
	}
	a := &modernClient{t: t, url: urls[0], token: "a", tasks: true}
	b := &modernClient{t: t, url: urls[1], token: "a", tasks: true}
	same := func(handle string) modernTask {
		t.Helper()
		ra, rb := a.result("tasks/get", map[string]any{"taskId": handle}), b.result("tasks/get", map[string]any{"taskId": handle})
		if string(ra) != string(rb) {
			t.Errorf("tasks/get of an ended task:\n a: %s\n b: %s", ra, rb)
		}
		var tk modernTask
		decode(t, ra, &tk)
		return tk
	}

	// Input: the task runs on a; b sees the question and takes the answer;
	// a's later answer to the same request is ignored.
	tk := a.start("ask", map[string]any{"text": "x"})
	<-ask.started
	close(ask.ask)
	got := b.until(tk.TaskID, "working")
	if got.Status != "input_required" || len(got.InputRequests) != 1 {
		t.Fatalf("b sees %+v, want the question", got)
	}
	var key string
	for k := range got.InputRequests {
		key = k
	}
	for _, c := range []*modernClient{b, a} {
		c.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"answer": "from " + c.url[len(c.url)-5:]}},
		}})
	}
	close(ask.finish)
	got = a.until(tk.TaskID, "working", "input_required")
	if want := fmt.Sprintf(`{"branch":"from %s"}`, urls[1][len(urls[1])-5:]); got.Status != "completed" || string(got.Result.StructuredContent) != want {
		t.Errorf("a sees %+v, want completed with b's answer %s", got, want)
	}
	same(tk.TaskID)

	// Cancel: the task runs on b; a cancels it, and its ctx on b ends.
	tk = b.start("slow", map[string]any{"text": "far"})
	if got := <-tools.started; got != "far" {
		t.Fatalf("started %q", got)
	}
	if got := a.get(tk.TaskID); got.Status != "working" || got.PollIntervalMs != 1000 {
		t.Errorf("a sees %+v, want working", got)
	}
	a.result("tasks/cancel", map[string]any{"taskId": tk.TaskID})
	if err := <-tools.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the task's ctx on b ended with %v", err)
	}
	got = a.until(tk.TaskID, "working")
	if got.Status != "cancelled" || got.StatusMessage != "bgtask: task cancelled" {
		t.Errorf("a sees %+v, want cancelled", got)
	}
	same(tk.TaskID)

	// A long result: whole from a, which ran it; cut, visibly, from b.
	tk = a.start("big", map[string]any{"text": "x"})
	got = b.until(tk.TaskID, "working")
	var whole struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	decode(t, a.result("tasks/get", map[string]any{"taskId": tk.TaskID}), &whole)
	content := `"content":[{"type":"text","text":"\"` + strings.Repeat("x", bigLen) + `\""}]`
	if want := `{` + content + `,"resultType":"complete"}`; whole.Status != "completed" || string(whole.Result) != want {
		t.Errorf("a's result is not whole: %s %.100s", whole.Status, whole.Result)
	}
	// The cut copy names the size of the tool's result as the record had it.
	marker := fmt.Sprintf("…[truncated: %d bytes total]", len(`{`+content+`}`))
	if got.Status != "completed" || len(got.Result.Content) != 1 || !strings.HasSuffix(got.Result.Content[0].Text, marker) || !strings.HasPrefix(got.Result.Content[0].Text, `"xxxxxxxx`) {
		t.Errorf("b's result: %.200v, want the cut copy ending %q", got.Result, marker)
	}

	for _, url := range urls {
		bob := &modernClient{t: t, url: url, token: "b", tasks: true}
		if e := bob.fail("tasks/get", map[string]any{"taskId": tk.TaskID}); e.Code != -32602 || e.Message != "Task not found: "+tk.TaskID {
			t.Errorf("bob at %s: %+v", url, e)
		}
	}
}

// TestModernFleetProcesses is the fleet of TestModernFleetPostgres as two
// server processes (internal/tsserver -pg, instances a and b, one
// PostgreSQL database) and one client alternating between them: the
// question of a task that a runs is answered through b (a's later answer
// ignored), a task that b runs is cancelled through a, and both answer
// the same JSON for each ended task.
func TestModernFleetProcesses(t *testing.T) {
	dsn := pgtest.StartDSN(t)
	bin := buildTSServer(t, t.TempDir())
	var urls []string
	for _, name := range []string{"a", "b"} {
		urls = append(urls, startTSServerHTTP(t, bin, "-pg", dsn, "-instance", name, "-http", "127.0.0.1:0", "-owner", "alice"))
	}
	a := &modernClient{t: t, url: urls[0], tasks: true}
	b := &modernClient{t: t, url: urls[1], tasks: true}
	same := func(handle string) modernTask {
		t.Helper()
		ra, rb := a.result("tasks/get", map[string]any{"taskId": handle}), b.result("tasks/get", map[string]any{"taskId": handle})
		if string(ra) != string(rb) {
			t.Errorf("tasks/get of an ended task:\n a: %s\n b: %s", ra, rb)
		}
		var tk modernTask
		decode(t, ra, &tk)
		return tk
	}

	tk := a.start("ask", map[string]any{"question": "which branch?"})
	got := b.until(tk.TaskID, "working")
	if got.Status != "input_required" || len(got.InputRequests) != 1 || got.StatusMessage != "which branch?" {
		t.Fatalf("b sees %+v, want the question", got)
	}
	for key := range got.InputRequests {
		for _, c := range []*modernClient{b, a} {
			c.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{
				key: map[string]any{"action": "accept", "content": map[string]any{"answer": "from " + c.url}},
			}})
		}
	}
	got = a.until(tk.TaskID, "working", "input_required")
	if want := `{"answer":"from ` + urls[1] + `"}`; got.Status != "completed" || string(got.Result.StructuredContent) != want {
		t.Errorf("a sees %+v, want completed with b's answer", got)
	}
	same(tk.TaskID)

	tk = b.start("hold", map[string]any{"label": "far"})
	var started payload
	decode(t, b.result("tools/call", map[string]any{"name": "probe", "arguments": map[string]any{"label": "far", "until": "started"}}), &started)
	if got := a.get(tk.TaskID); got.Status != "working" {
		t.Errorf("a sees %+v, want working", got)
	}
	a.result("tasks/cancel", map[string]any{"taskId": tk.TaskID})
	var stopped payload
	decode(t, b.result("tools/call", map[string]any{"name": "probe", "arguments": map[string]any{"label": "far", "until": "stopped"}}), &stopped)
	if len(stopped.Content) != 1 || !strings.Contains(stopped.Content[0].Text, "cancel") {
		t.Errorf("the hold on b stopped with %+v, want cancelled", stopped)
	}
	if got := a.until(tk.TaskID, "working"); got.Status != "cancelled" {
		t.Errorf("a sees %+v, want cancelled", got)
	}
	same(tk.TaskID)
}

// startTSServerHTTP starts a tsserver serving HTTP and returns its URL; its
// stdin is closed at the end of the test, which ends it.
func startTSServerHTTP(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("tsserver %v: %v\n%s", args, err, stderr.String())
		}
		if strings.Contains(stderr.String(), "DATA RACE") {
			t.Errorf("the race detector reported a data race in tsserver:\n%s", stderr.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("tsserver printed no address: %v\n%s", sc.Err(), stderr.String())
	}
	url, ok := strings.CutPrefix(sc.Text(), "listening ")
	if !ok {
		t.Fatalf("tsserver printed %q", sc.Text())
	}
	return url
}

// Several open questions across a fleet: the task runs on a and asks two
// questions at once; b sees both, answers one, and at once both instances
// show only the other; a answers it, and both show the same completed task.
func TestModernFleetInputSeveral(t *testing.T) {
	dsn := pgtest.StartDSN(t)
	var urls []string
	for _, name := range []string{"instance-a", "instance-b"} {
		s := newServer(t, pgManager(t, dsn, name), nil, bgmcp.WithOwnerFunc(userOwner))
		if err := s.AddTool(twoQuestions); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, modernServer(t, s, true))
	}
	a := &modernClient{t: t, url: urls[0], token: "a", tasks: true}
	b := &modernClient{t: t, url: urls[1], token: "a", tasks: true}
	tk := a.start("two_questions", map[string]any{"text": "x"})
	var got modernTask
	for got.Status == "" || got.Status == "working" || got.Status == "input_required" && len(got.InputRequests) < 2 {
		got = b.get(tk.TaskID) // until both goroutines asked, or the task ended
	}
	keyOf := map[string]string{}
	for k, r := range got.InputRequests {
		keyOf[r.Params.Message] = k
	}
	if len(keyOf) != 2 || keyOf["name?"] == "" || keyOf["colour?"] == "" {
		t.Fatalf("b sees %+v, want both questions", got)
	}
	accept := func(answer string) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}
	}
	b.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{keyOf["name?"]: accept("Ann")}})
	for i, c := range []*modernClient{b, a} {
		got := c.get(tk.TaskID)
		if _, ok := got.InputRequests[keyOf["colour?"]]; got.Status != "input_required" || len(got.InputRequests) != 1 || !ok {
			t.Errorf("instance %d after b's partial update: %+v, want only the colour open", i, got)
		}
	}
	a.result("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{keyOf["colour?"]: accept("teal")}})
	got = a.until(tk.TaskID, "working", "input_required")
	if got.Status != "completed" || string(got.Result.StructuredContent) != `{"colour":"teal","name":"Ann"}` {
		t.Errorf("a sees %+v, want both answers", got)
	}
	if ra, rb := a.result("tasks/get", map[string]any{"taskId": tk.TaskID}), b.result("tasks/get", map[string]any{"taskId": tk.TaskID}); string(ra) != string(rb) {
		t.Errorf("tasks/get of the ended task:\n a: %s\n b: %s", ra, rb)
	}
}
