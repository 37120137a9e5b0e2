package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask/agent"
)

// The research tool's arguments: the model's mistakes are errors matching
// agent.ErrToolArguments, with the exact text the model reads.
func TestResearchArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, topic string
		steps       int
		question    string
		err         string
	}{
		{`{"topic":"lsm trees","steps":null}`, "lsm trees", 3, "", ""},
		{`{"topic":"  b-trees ","steps":20,"question":null}`, "b-trees", 20, "", ""},
		{`{"topic":"b-trees","steps":1,"question":" which fanout? "}`, "b-trees", 1, "which fanout?", ""},
		{`{"topic":"x","steps":1,"question":"` + strings.Repeat("q", 201) + `"}`, "", 0, "", "invalid arguments: question: want valid UTF-8 of at most 200 bytes"},
		{`{"topic":"x","steps":0}`, "", 0, "", "invalid arguments: steps 0: want 1 to 20"},
		{`{"topic":"x","steps":21}`, "", 0, "", "invalid arguments: steps 21: want 1 to 20"},
		{`{"topic":" ","steps":null}`, "", 0, "", "invalid arguments: topic is missing or blank"},
		{`{"steps":2}`, "", 0, "", "invalid arguments: topic is missing or blank"},
		{`{"topic":"` + strings.Repeat("a", 201) + `","steps":1}`, "", 0, "", "invalid arguments: topic: want valid UTF-8 of at most 200 bytes"},
		{`{"topic":"x","steps":1,"depth":9}`, "", 0, "", `invalid arguments: json: unknown field "depth"`},
		{`[1]`, "", 0, "", "invalid arguments: json: cannot unmarshal array into Go value of type struct { Topic *string \"json:\\\"topic\\\"\"; Steps *int \"json:\\\"steps\\\"\"; Question *string \"json:\\\"question\\\"\" }"},
	} {
		topic, steps, question, err := researchArgs([]byte(tc.args))
		if tc.err != "" {
			if !errors.Is(err, agent.ErrToolArguments) || err.Error() != tc.err {
				t.Errorf("%s: %v, want %q matching ErrToolArguments", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || topic != tc.topic || steps != tc.steps || question != tc.question {
			t.Errorf("%s: %q %d %q %v, want %q %d %q", tc.args, topic, steps, question, err, tc.topic, tc.steps, tc.question)
		}
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"LSM trees":                "lsm-trees",
		"  --B+ trees, 2nd ed.-- ": "b-trees-2nd-ed",
		"Ünïcode Straße":           "ünïcode-straße",
		"!!!":                      "topic",
		strings.Repeat("ab ", 30):  strings.TrimSuffix(strings.Repeat("ab-", 16), "-"),
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// keep drops the oldest turns whole: the kept history starts at a message
// the user wrote (or is empty), and is within the cap.
func TestKeepHistory(t *testing.T) {
	t.Parallel()
	turn := func(n int) []entry { // the user's message, then n more
		out := []entry{{role: "user", plain: true, msg: openai.UserMessage(fmt.Sprint("u", n))}}
		for range n {
			out = append(out, entry{role: "tool"})
		}
		return out
	}
	conv := append(append(turn(2), turn(0)...), turn(3)...) // 3 + 1 + 4 messages
	for _, tc := range []struct{ max, want int }{{8, 8}, {7, 5}, {5, 5}, {4, 4}, {3, 0}} {
		s := &server{cfg: config{maxHistory: tc.max}}
		th := &thread{}
		s.keep(th, conv)
		if len(th.history) != tc.want || len(th.history) > 0 && !th.history[0].plain {
			t.Errorf("max %d: kept %d messages (first plain: %v), want %d from a user's message", tc.max, len(th.history),
				len(th.history) > 0 && th.history[0].plain, tc.want)
		}
	}
}
