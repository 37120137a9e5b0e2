package crashloop

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Judge finds exactly the records that the model never heard (outside a
// proving commit a kill cut), heard twice, left unmarked or left live,
// with their kinds: a hand-out is heard once a later mark of it commits.
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
		{"heard once", rec("a", done, true), []ProcLog{{Lines: []string{"took owner 1 a completed", "stepend owner 1", "taking owner 2 a", "marked owner 2"}}}, "", 1},
		{"heard, marked at RunEnd", rec("a", done, true), []ProcLog{{Lines: []string{"took owner 1 a completed", "stepend owner 1", "taking owner 0 a", "marked owner 0"}}}, "", 1},
		{"heard, marked outside a step", rec("a", done, true), []ProcLog{{Lines: []string{"took owner 1 a completed", "mark - - a"}}}, "", 1},
		{"the proving commit cut by a kill, marked", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"took owner 1 a completed", "stepend owner 1", "taking owner 2 a"}}}, "InFlight", 0},
		{"the proving commit cut by a kill, not marked, never again", rec("a", done, false), []ProcLog{{Killed: true, Lines: []string{"took owner 1 a completed", "taking owner 2 a"}}}, "Lost", 0},
		{"the proving commit failed", rec("a", done, false), []ProcLog{{Killed: true, Lines: []string{"took owner 1 a completed", "taking owner 2 a", "markfail owner 2"}}}, "Lost", 0},
		{"handed, killed before the proof, heard in the next process", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"took owner 1 a completed", "stepend owner 1"}}, {Lines: []string{"took owner 1 a completed", "taking owner 2 a", "marked owner 2"}}}, "", 1},
		{"a mark before the hand-out proves nothing", rec("a", done, true), []ProcLog{{Lines: []string{"taking owner 1 a", "marked owner 1", "took owner 2 a completed"}}}, "Lost", 0},
		{"never handed out", rec("a", done, false), nil, "Lost", 0},
		{"heard twice", rec("a", done, true), []ProcLog{{Killed: true, Lines: []string{"took x 3 a completed", "taking x 4 a", "marked x 4"}}, {Lines: []string{"took owner 1 a interrupted", "taking owner 0 a", "marked owner 0"}}}, "Doubled", 2},
		{"heard, not marked", rec("a", done, false), []ProcLog{{Lines: []string{"took owner 1 a completed", "taking owner 2 a", "marked owner 2"}}}, "Unmarked", 1},
		{"live", rec("a", bgtype.StatusRunning, false), nil, "Live", 0},
		{"silent", bgtype.TaskMeta{ID: "a", Owner: "o", Status: done, Wake: bgtype.WakeSilent}, nil, "", 0},
		{"ended as its process committed", rec("a", bgtype.StatusInterrupted, true), []ProcLog{{Lines: []string{"ended a interrupted", "took owner 1 a interrupted", "mark - - a"}}}, "", 1},
		{"overwritten", rec("a", bgtype.StatusInterrupted, true), []ProcLog{{Killed: true, Lines: []string{"ended a completed"}}, {Lines: []string{"took owner 1 a interrupted", "mark - - a"}}}, "Overwritten", 1},
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
	logs := []ProcLog{{Killed: true, Lines: []string{"spawn owner p plain", "took owner 1 p completed", "stepend owner 1", "mark - - p", "mark - - c"}},
		{Lines: []string{"took s 1 c interrupted", "took owner 4 c interrupted", "stepend owner 4", "taking owner 0 c", "taking owner 0 c", "marked owner 0"}}}
	v := Judge("o", recs, logs)
	if want := map[string]int{KindPlain: 1, KindSubAgent: 1, KindChild: 1}; !reflect.DeepEqual(v.Kinds, want) || v.Took != 3 || v.Premarked != 2 {
		t.Errorf("kinds %v, took %d, premarked %d; want %v, 3, 2", v.Kinds, v.Took, v.Premarked, want)
	}
	want := "1 lost (ended, never heard by the model, not in a commit cut by a kill): s (sub-agent)\n" +
		"1 doubled (heard by the model more than once): c (child) x2"
	if err := v.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want\n%s", err, want)
	}
	if s := v.Summary(); !strings.Contains(s, "lost 1, doubled 1, unmarked 0, live 0, overwritten 0") {
		t.Errorf("Summary() = %q", s)
	}
}
