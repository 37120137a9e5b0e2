package crashloop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Judge finds exactly the records that were lost outside the batch a kill
// cut, handed out twice, left unmarked or left live, with their kinds.
func TestJudge(t *testing.T) {
	t.Parallel()
	rec := func(id string, status bgtype.Status, announced bool) bgtype.TaskMeta {
		return bgtype.TaskMeta{ID: id, Owner: "o", Status: status, Announced: announced}
	}
	done := bgtype.StatusCompleted
	for _, tc := range []struct {
		name   string
		rec    bgtype.TaskMeta
		logs   []ProcLog
		field  string // the Verdict list that must hold the record, "" for none
		handed int
	}{
		{"handed out once", rec("a", done, true), []ProcLog{{Lines: []string{"taking owner 1 a", "marked owner 1", "took owner 1 a completed", "stepend owner 1"}}}, "", 1},
		{"cut between mark and hand-out", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"taking owner 1 a", "marked owner 1"}}}, "InFlight", 0},
		{"cut, then handed out by the next process", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"taking owner 1 a"}}, {Lines: []string{"took owner 1 a completed", "stepend owner 1"}}}, "", 1},
		{"cut but not marked, never handed out", rec("a", done, false), []ProcLog{{Killed: true, Lines: []string{"taking owner 1 a"}}}, "Lost", 0},
		{"taken in a step that ended", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"taking owner 1 a", "marked owner 1", "stepend owner 1"}}}, "Lost", 0},
		{"taken in a process that was not killed", rec("a", done, true), []ProcLog{{Lines: []string{"taking owner 1 a", "marked owner 1"}}}, "Lost", 0},
		{"taken by another step of the cut one's", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"taking owner 1 a", "marked owner 1", "took owner 1 a completed", "taking owner 2 a"}}}, "", 1},
		{"marked outside a hand-out, never handed out", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"mark - - a"}}}, "Lost", 0},
		{"never handed out", rec("a", done, false), nil, "Lost", 0},
		{"handed out twice", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"took x 3 a completed"}}, {Lines: []string{"took owner 1 a interrupted"}}}, "Doubled", 2},
		{"handed out, not marked", rec("a", done, false), []ProcLog{{Lines: []string{"took owner 1 a completed"}}}, "Unmarked", 1},
		{"live", rec("a", bgtype.StatusRunning, false), nil, "Live", 0},
		{"silent", bgtype.TaskMeta{ID: "a", Owner: "o", Status: done, Wake: bgtype.WakeSilent}, nil, "", 0},
		{"ended as its process committed", rec("a", bgtype.StatusInterrupted, true), []ProcLog{{Lines: []string{"ended a interrupted", "took owner 1 a interrupted"}}}, "", 1},
		{"overwritten", rec("a", bgtype.StatusInterrupted, true), []ProcLog{{Killed: true, Lines: []string{"ended a completed"}}, {Lines: []string{"took owner 1 a interrupted"}}}, "Overwritten", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := Judge("o", []bgtype.TaskMeta{tc.rec}, tc.logs)
			lists := map[string][]Task{"InFlight": v.InFlight, "Lost": v.Lost, "Doubled": v.Doubled, "Unmarked": v.Unmarked, "Live": v.Live, "Overwritten": v.Overwritten}
			for name, got := range lists {
				var want []Task
				if name == tc.field {
					want = []Task{{ID: "a", Kind: KindPlain, N: tc.handed, Status: tc.rec.Status}}
					if name == "Overwritten" {
						want[0].Ended = "completed then interrupted"
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if err := v.Err(); (err != nil) != (tc.field != "" && tc.field != "InFlight") {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

// Judge names each record's kind from the tree, counts the events handed
// out and the marks outside a hand-out, and Err names the problem tasks
// with their kinds.
func TestJudgeKindsAndCounts(t *testing.T) {
	t.Parallel()
	recs := []bgtype.TaskMeta{
		{ID: "p", Owner: "o", Status: bgtype.StatusCompleted, Announced: true},
		{ID: "s", Owner: "o", Type: bgtype.TypeSubAgent, Status: bgtype.StatusInterrupted},
		{ID: "c", Owner: "s", Status: bgtype.StatusInterrupted, Announced: true},
	}
	logs := []ProcLog{{Killed: true, Lines: []string{"spawn owner p plain", "took owner 1 p completed", "stepend owner 1", "mark - - c"}},
		{Lines: []string{"took s 1 c interrupted", "took owner 4 c interrupted", "stepend owner 4"}}}
	v := Judge("o", recs, logs)
	if want := map[string]int{KindPlain: 1, KindSubAgent: 1, KindChild: 1}; !reflect.DeepEqual(v.Kinds, want) || v.Took != 3 || v.Premarked != 1 {
		t.Errorf("kinds %v, took %d, premarked %d; want %v, 3, 1", v.Kinds, v.Took, v.Premarked, want)
	}
	want := "1 lost (ended, never handed to the model, not in a batch in flight at a kill): s (sub-agent)\n" +
		"1 doubled (handed to the model more than once): c (child) x2"
	if err := v.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want\n%s", err, want)
	}
	if s := v.Summary(); !strings.Contains(s, "lost 1, doubled 1, unmarked 0, live 0, overwritten 0") {
		t.Errorf("Summary() = %q", s)
	}
}
