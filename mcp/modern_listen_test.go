package bgmcp_test

import (
	"net/http"
	"strings"
	"testing"
)

// subscriptions/listen: task status notifications are not offered, so the
// acknowledgement agrees to no task and the client polls; a request for
// them that did not declare the tasks extension is refused with -32021, as
// the extension says, and a listen without them is the SDK's.
func TestModernListenTaskIDs(t *testing.T) {
	url := modernServer(t, newServer(t, newManager(t), newTestTools()), false)
	tk := (&modernClient{t: t, url: url, tasks: true}).start("slow", map[string]any{"text": "x"})
	for _, tc := range []struct {
		name          string
		tasks         bool
		notifications map[string]any
		code          int // the JSON-RPC error's, or 0 for an acknowledgement
	}{
		{"undeclared, with task ids", false, map[string]any{"taskIds": []string{tk.TaskID}}, -32021},
		{"undeclared, with no task id", false, map[string]any{"taskIds": []string{}}, -32021},
		{"declared, with task ids", true, map[string]any{"taskIds": []string{tk.TaskID, "task_unknown"}}, 0},
		{"undeclared, without task ids", false, map[string]any{"toolsListChanged": false}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &modernClient{t: t, url: url, tasks: tc.tasks}
			r := c.post("subscriptions/listen", map[string]any{"notifications": tc.notifications})
			if tc.code != 0 {
				if r.err == nil || r.err.Code != tc.code || r.err.Message != "Missing required client capability: io.modelcontextprotocol/tasks" ||
					string(r.err.Data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
					t.Errorf("%d %s, want the error %d", r.status, r.body, tc.code)
				}
				return
			}
			if r.status != http.StatusOK || r.err != nil || r.result == nil ||
				!strings.Contains(r.body, `"method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"notifications":{}}`) || strings.Contains(r.body, "taskIds") {
				t.Errorf("%d %s, want an acknowledgement of nothing", r.status, r.body)
			}
		})
	}
}
