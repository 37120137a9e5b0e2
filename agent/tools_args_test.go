package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// commonBadArgs are inputs every tool refuses the same way.
var commonBadArgs = []struct{ args, want string }{
	{``, `invalid arguments: not a JSON object`},
	{" \t\n ", `invalid arguments: not a JSON object`},
	{` \n `, `invalid arguments: malformed JSON`},
	{`null`, `invalid arguments: not a JSON object`},
	{`[]`, `invalid arguments: not a JSON object`},
	{`"task_x"`, `invalid arguments: not a JSON object`},
	{`42`, `invalid arguments: not a JSON object`},
	{`{`, `invalid arguments: malformed JSON`},
	{`{"a"}`, `invalid arguments: malformed JSON`},
	{`{"a":1,}`, `invalid arguments: malformed JSON`},
	{`{'a':1}`, `invalid arguments: malformed JSON`},
	{`{1:2}`, `invalid arguments: malformed JSON`},
	{`nul`, `invalid arguments: malformed JSON`},
	{`{} {}`, `invalid arguments: trailing data after the JSON object`},
	{`{}x`, `invalid arguments: trailing data after the JSON object`},
	{`{}]`, `invalid arguments: trailing data after the JSON object`},
	{`{"foo":1}`, `invalid arguments: unknown field "foo"`},
	{`{"":null}`, `invalid arguments: unknown field ""`},
}

// perToolBadArgs are each tool's own bad inputs.
var perToolBadArgs = map[string][]struct{ args, want string }{
	"list_tasks": {
		{`{"status":["done"]}`, `invalid arguments: unknown status "done"; valid: queued, running, awaiting_input, completed, failed, cancelled, interrupted`},
		{`{"status":["Running"]}`, `invalid arguments: unknown status "Running"; valid: queued, running, awaiting_input, completed, failed, cancelled, interrupted`},
		{`{"status":[""]}`, `invalid arguments: unknown status ""; valid: queued, running, awaiting_input, completed, failed, cancelled, interrupted`},
		{`{"status":"running"}`, `invalid arguments: "status" must be an array`},
		{`{"status":1}`, `invalid arguments: "status" must be an array`},
		{`{"status":{}}`, `invalid arguments: "status" must be an array`},
		{`{"status":[]}`, `invalid arguments: "status" is empty`},
		{`{"status":["running",1]}`, `invalid arguments: "status[1]" must be a string`},
		{`{"status":[null]}`, `invalid arguments: "status[0]" must be a string`},
		{`{"status":["running","failed","running"]}`, `invalid arguments: "status" lists "running" twice`},
		{`{"type":" "}`, `invalid arguments: "type" is blank`},
		{`{"type":" 　"}`, `invalid arguments: "type" is blank`},
		{`{"type":{}}`, `invalid arguments: "type" must be a string`},
		{`{"type":` + repeatedArg("é", 129) + `}`, `invalid arguments: "type" is longer than 128 characters`},
		{`{"limit":0}`, `invalid arguments: "limit" must be from 1 to 200`},
		{`{"limit":201}`, `invalid arguments: "limit" must be from 1 to 200`},
		{`{"limit":-1e400}`, `invalid arguments: "limit" must be from 1 to 200`},
		{`{"limit":2.5}`, `invalid arguments: "limit" must be an integer`},
		{`{"limit":10.000000000000000001}`, `invalid arguments: "limit" must be an integer`},
		{`{"limit":"10"}`, `invalid arguments: "limit" must be an integer`},
		{`{"cursor":""}`, `invalid arguments: "cursor" is not a next_cursor of list_tasks`},
		{`{"cursor":"00000000000000017461736B5F78"}`, `invalid arguments: "cursor" is not a next_cursor of list_tasks`},
		{`{"cursor":"0000000000000001"}`, `invalid arguments: "cursor" is not a next_cursor of list_tasks`},
		{`{"cursor":"task_x"}`, `invalid arguments: "cursor" is not a next_cursor of list_tasks`},
		{`{"cursor":"` + strings.Repeat("a", 274) + `"}`, `invalid arguments: "cursor" is longer than 272 characters`},
		{`{"cursor":7}`, `invalid arguments: "cursor" must be a string`},
		{`{"Status":["running"]}`, `invalid arguments: unknown field "Status"`},
		{`{"status":["running"],"kind":"x"}`, `invalid arguments: unknown field "kind"`},
		{`{"status":["bogus"],"kind":"x"}`, `invalid arguments: unknown field "kind"`},
	},
	"get_task": {
		{`{"task_id":"task_x","output_since":-1}`, `invalid arguments: "output_since" must be from 0 to 1125899906842624`},
		{`{"task_id":"task_x","output_since":1125899906842625}`, `invalid arguments: "output_since" must be from 0 to 1125899906842624`},
		{`{"task_id":"task_x","output_since":0.5}`, `invalid arguments: "output_since" must be an integer`},
		{`{"task_id":"task_x","output_tail":0}`, `invalid arguments: "output_tail" must be from 1 to 8192`},
		{`{"task_id":"task_x","output_tail":"10"}`, `invalid arguments: "output_tail" must be an integer`},
		{`{"task_id":"task_x","output_since":3,"output_tail":10}`, `invalid arguments: "output_tail" is not allowed with "output_since"`},
		{`{}`, `invalid arguments: missing "task_id"`},
		{`{"task_id":null}`, `invalid arguments: missing "task_id"`},
		{`{"task_id":""}`, `invalid arguments: "task_id" is blank`},
		{`{"task_id":" \t\n"}`, `invalid arguments: "task_id" is blank`},
		{`{"task_id":42}`, `invalid arguments: "task_id" must be a string`},
		{`{"task_id":true}`, `invalid arguments: "task_id" must be a string`},
		{`{"Task_ID":"task_x"}`, `invalid arguments: unknown field "Task_ID"`},
		{`{"task_id":` + repeatedArg("x", 129) + `}`, `invalid arguments: "task_id" is longer than 128 characters`},
		{`{"task_id":"task_x","task_id":null}`, `invalid arguments: missing "task_id"`},
		{`{"task_id":"task_x","foo":null}`, `invalid arguments: unknown field "foo"`},
	},
	"cancel_task": {
		{`{}`, `invalid arguments: missing "target"`},
		{`{"target":null}`, `invalid arguments: missing "target"`},
		{`{"target":"self"}`, `invalid arguments: "target" must be an object`},
		{`{"target":[]}`, `invalid arguments: "target" must be an object`},
		{`{"target":{}}`, `invalid arguments: missing "target.relation"`},
		{`{"target":{"relation":null}}`, `invalid arguments: missing "target.relation"`},
		{`{"target":{"relation":true}}`, `invalid arguments: "target.relation" must be a string`},
		{`{"target":{"relation":"parent"}}`, `invalid arguments: unknown relation "parent" in "target.relation"; valid: self, child`},
		{`{"target":{"relation":" self"}}`, `invalid arguments: unknown relation " self" in "target.relation"; valid: self, child`},
		{`{"target":{"relation":""}}`, `invalid arguments: unknown relation "" in "target.relation"; valid: self, child`},
		{`{"target":{"relation":"child"}}`, `invalid arguments: missing "target.name"`},
		{`{"target":{"relation":"child","name":"  "}}`, `invalid arguments: "target.name" is blank`},
		{`{"target":{"relation":"child","name":7}}`, `invalid arguments: "target.name" must be a string`},
		{`{"target":{"relation":"self","name":"x"}}`, `invalid arguments: "target.name" is not allowed with relation "self"`},
		{`{"target":{"relation":"self","extra":1}}`, `invalid arguments: unknown field "target.extra"`},
		{`{"target":{"relation":"child","name":` + repeatedArg("n", 129) + `}}`, `invalid arguments: "target.name" is longer than 128 characters`},
		{`{"target":{"relation":"self","name":""}}`, `invalid arguments: "target.name" is not allowed with relation "self"`},
		{`{"target":{"relation":"child","name":"w","relation":"self"}}`, `invalid arguments: "target.name" is not allowed with relation "self"`},
		{`{"target":{"relation":"self"},"task_id":"task_x"}`, `invalid arguments: unknown field "task_id"`},
		{`{"target":{"relation":"self"},"reason":"  "}`, `invalid arguments: "reason" is blank`},
		{`{"target":{"relation":"self"},"reason":""}`, `invalid arguments: "reason" is blank`},
		{`{"target":{"relation":"self"},"reason":"\u3000\t"}`, `invalid arguments: "reason" is blank`},
	},
	"send_message": {
		{`{"message":"hi"}`, `invalid arguments: missing "to"`},
		{`{"to":"worker","message":"hi"}`, `invalid arguments: "to" must be an object`},
		{`{"to":{},"message":"hi"}`, `invalid arguments: missing "to.relation"`},
		{`{"to":{"relation":"child"},"message":"hi"}`, `invalid arguments: missing "to.name"`},
		{`{"to":{"relation":"child","name":""},"message":"hi"}`, `invalid arguments: "to.name" is blank`},
		{`{"to":{"relation":"agent"},"message":"hi"}`, `invalid arguments: unknown relation "agent" in "to.relation"; valid: child, parent`},
		{`{"to":{"relation":"self"},"message":"hi"}`, `invalid arguments: unknown relation "self" in "to.relation"; valid: child, parent`},
		{`{"to":{"relation":"agent","thread_id":"t1"},"message":"hi"}`, `invalid arguments: unknown field "to.thread_id"`},
		{`{"to":{"relation":"parent","name":"boss"},"message":"hi"}`, `invalid arguments: "to.name" is not allowed with relation "parent"`},
		{`{"to":{"relation":"child","name":"worker"}}`, `invalid arguments: missing "message"`},
		{`{"to":{"relation":"child","name":"worker"},"message":null}`, `invalid arguments: missing "message"`},
		{`{"to":{"relation":"child","name":"worker"},"message":" \n"}`, `invalid arguments: "message" is blank`},
		{`{"to":{"relation":"child","name":"worker"},"message":5}`, `invalid arguments: "message" must be a string`},
		{`{"to":{"relation":"child","name":"worker"},"message":{"text":"hi"}}`, `invalid arguments: "message" must be a string`},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":""}`, `invalid arguments: "in_reply_to" is blank`},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":1}`, `invalid arguments: "in_reply_to" must be a string`},
		{`{"to":{"relation":"parent"},"message":"hi","in_reply_to":"input_1"}`, `invalid arguments: "in_reply_to" is not allowed with relation "parent"`},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","content":"hi"}`, `invalid arguments: unknown field "content"`},
		{`{"to":{"relation":"child","name":"worker"},"message":` + repeatedArg("m", 16385) + `}`, `invalid arguments: "message" is longer than 16384 characters`},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","in_reply_to":` + repeatedArg("i", 129) + `}`, `invalid arguments: "in_reply_to" is longer than 128 characters`},
		{`{"to":{"relation":"child","name":"worker"},"message":"hi","message":""}`, `invalid arguments: "message" is blank`},
	},
	"wait_task": {
		{`{"task_id":"task_x","output_since":-2}`, `invalid arguments: "output_since" must be from 0 to 1125899906842624`},
		{`{"task_id":"task_x","output_since":true}`, `invalid arguments: "output_since" must be an integer`},
		{`{}`, `invalid arguments: missing "task_id"`},
		{`{"timeout_seconds":5}`, `invalid arguments: missing "task_id"`},
		{`{"task_id":" "}`, `invalid arguments: "task_id" is blank`},
		{`{"task_id":"task_x","timeout_seconds":0}`, `invalid arguments: "timeout_seconds" must be from 1 to 300`},
		{`{"task_id":"task_x","timeout_seconds":-5}`, `invalid arguments: "timeout_seconds" must be from 1 to 300`},
		{`{"task_id":"task_x","timeout_seconds":301}`, `invalid arguments: "timeout_seconds" must be from 1 to 300`},
		{`{"task_id":"task_x","timeout_seconds":1e400}`, `invalid arguments: "timeout_seconds" must be from 1 to 300`},
		{`{"task_id":"task_x","timeout_seconds":99999999999999999999}`, `invalid arguments: "timeout_seconds" must be from 1 to 300`},
		{`{"task_id":"task_x","timeout_seconds":1.5}`, `invalid arguments: "timeout_seconds" must be an integer`},
		{`{"task_id":"task_x","timeout_seconds":1.0000000000000001}`, `invalid arguments: "timeout_seconds" must be an integer`},
		{`{"task_id":"task_x","timeout_seconds":300.00000000000001}`, `invalid arguments: "timeout_seconds" must be an integer`},
		{`{"task_id":"task_x","timeout_seconds":"30"}`, `invalid arguments: "timeout_seconds" must be an integer`},
		{`{"task_id":"task_x","timeout_seconds":true}`, `invalid arguments: "timeout_seconds" must be an integer`},
		{`{"task_id":"task_x","timeout":30}`, `invalid arguments: unknown field "timeout"`},
	},
}

// argState is everything a tool call could change.
type argState struct {
	records  []bgtype.TaskMeta
	inbox    int
	ownerBox int
	messages []bgtask.MessageRecord
	stats    bgtask.Stats
}

// TestToolBadArguments: every bad input gives its exact error, matching
// ErrToolArguments, and changes nothing, in a scope where a valid call
// would act (a run with a live sub-agent named "worker").
func TestToolBadArguments(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	worker, _, tk := spawnReceiver(t, o, 1, bgtask.WithName("worker"))
	ctx := runCtx(t.Context(), "run-1")
	if _, err := o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() }); err != nil {
		t.Fatal(err)
	}
	ownerBox, _ := o.Inbox()
	state := func() argState {
		msgs, err := o.Messages(t.Context(), worker)
		if err != nil {
			t.Fatal(err)
		}
		return argState{listTasks(t, o), tk.Inbox().Len(), ownerBox.Len(), msgs, m.Stats()}
	}
	before := state()
	for _, tool := range Tools(o) {
		for _, tc := range append(commonBadArgs, perToolBadArgs[tool.Name]...) {
			for _, scope := range []context.Context{ctx, taskCtx(tk)} {
				res, err := tool.Call(scope, json.RawMessage(tc.args))
				if res != nil || err == nil || err.Error() != tc.want || !errors.Is(err, ErrToolArguments) {
					t.Errorf("%s(%q) = %s, %v; want %s", tool.Name, tc.args, res, err, tc.want)
				}
			}
		}
	}
	if after := state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("bad arguments changed the state:\n%+v\n%+v", before, after)
	}
	if n, _ := o.CancelTree(t.Context(), worker); n != 1 {
		t.Fatalf("the worker was already cancelled")
	}
}

func TestWaitTaskBadArgumentsWithLimit(t *testing.T) {
	m := newTestManager(t)
	tool := toolNamed(t, m.Owner("thread-1"), "wait_task", WithWaitLimit(10*time.Second))
	for _, args := range []string{`{"task_id":"task_x","timeout_seconds":11}`, `{"task_id":"task_x","timeout_seconds":300}`} {
		if err := callToolErr(t, t.Context(), tool, args); err.Error() != `invalid arguments: "timeout_seconds" must be from 1 to 10` {
			t.Errorf("wait_task(%s): %v", args, err)
		}
	}
	if !strings.HasPrefix(ErrToolArguments.Error(), "invalid arguments") {
		t.Fatal(ErrToolArguments)
	}
}

// TestToolErrorsDocumented: every bad-arguments error the tests expect
// reads as one of the texts listed in Tools' doc comment, and each
// listed text is expected by some test.
func TestToolErrorsDocumented(t *testing.T) {
	src, err := os.ReadFile("tools.go")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	var res []*regexp.Regexp
	for line := range strings.Lines(string(src)) {
		text, ok := strings.CutPrefix(line, "//\tinvalid arguments: ")
		if !ok {
			continue
		}
		text, _, _ = strings.Cut(strings.TrimSpace(text), "   ") // drop the comment column
		docs = append(docs, text)
		pat := regexp.QuoteMeta("invalid arguments: " + text)
		pat = regexp.MustCompile(`<[a-z]+>`).ReplaceAllString(pat, `.*`)
		res = append(res, regexp.MustCompile(`^`+pat+`$`))
	}
	if len(docs) < 10 {
		t.Fatalf("found %d documented errors in tools.go", len(docs))
	}
	used := make([]bool, len(res))
	var wants []string
	for _, tc := range commonBadArgs {
		wants = append(wants, tc.want)
	}
	for _, rows := range perToolBadArgs {
		for _, tc := range rows {
			wants = append(wants, tc.want)
		}
	}
	for _, want := range wants {
		found := false
		for i, re := range res {
			if re.MatchString(want) {
				used[i], found = true, true
			}
		}
		if !found {
			t.Errorf("%q is not among the errors tools.go lists", want)
		}
	}
	for i, u := range used {
		if !u {
			t.Errorf("tools.go lists %q, which no test expects", docs[i])
		}
	}
}
