package storetest_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/bgtask/bgtask/store/storetest"
)

// TestMain fails the package if any goroutine outlives its tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestJSONStore runs the whole suite, Retention and Corrupt included, on a
// store that keeps records as JSON: a second implementation that passes.
func TestJSONStore(t *testing.T) {
	storetest.Run(t, jsonConfig(flaws{}))
}

// flawEnv names the flaw TestFlawedStore runs the suite with, in a child
// process of TestFlawsAreCaught.
const flawEnv = "STORETEST_FLAW"

// flawCases maps each flaw to the checks that must fail because of it,
// and to no others.
var flawCases = map[string]struct {
	flaws flaws
	fail  []string
}{
	"gap":             {flaws{gap: true}, []string{"ConcurrentWriters"}},
	"lastWriteWins":   {flaws{lastWriteWins: true}, []string{"Announce", "ConcurrentWriters", "IdempotencyKeys", "Invariants", "KindLimiter", "Progress", "ReducerRules", "Resume", "Tags"}},
	"terminalFrozen":  {flaws{terminalFrozen: true}, []string{"Progress", "ReducerRules"}},
	"ignoreAt":        {flaws{ignoreAt: true}, []string{"ReducerRules"}},
	"notAtomic":       {flaws{notAtomic: true}, []string{"IdempotencyKeys", "InvalidActions"}},
	"moveID":          {flaws{moveID: true}, []string{"OwnerIsolation"}},
	"skipCorrupt":     {flaws{skipCorrupt: true}, []string{"Corrupt"}},
	"globalRetention": {flaws{globalRetention: true}, []string{"Retention"}},
	"childrenOfEmpty": {flaws{childrenOfEmpty: true}, []string{"Children"}},
	"localTime":       {flaws{localTime: true}, []string{"RoundTrip"}},
	"ignoreCtx":       {flaws{ignoreCtx: true}, []string{"CancelledContext"}},
	"noKeys":          {flaws{noKeys: true}, []string{"IdempotencyKeys"}},
	"noAnnounce":      {flaws{noAnnounce: true}, []string{"Announce"}},
	"deadInstances":   {flaws{deadInstances: true}, []string{"InstanceLiveness"}},
	"localCap":        {flaws{localCap: true}, []string{"KindClaimer", "KindLimiter"}},
	"claimOverwrites": {flaws{claimOverwrites: true}, []string{"KindLimiter"}},
	"unsorted":        {flaws{unsorted: true}, []string{"Announce", "Children", "Corrupt", "List", "ListEarlyBreak", "Remove", "ReplaceAll", "Retention", "RoundTrip", "Tags", "Upsert"}},
}

// TestFlawedStore runs the suite on the jsonStore with the flaw named by
// $STORETEST_FLAW; without it, it is skipped. It is the child process of
// TestFlawsAreCaught, and fails by design.
func TestFlawedStore(t *testing.T) {
	name := os.Getenv(flawEnv)
	if name == "" {
		t.Skip("run by TestFlawsAreCaught")
	}
	c, ok := flawCases[name]
	if !ok {
		t.Fatalf("unknown flaw %q", name)
	}
	storetest.Run(t, jsonConfig(c.flaws))
}

// failLine matches a failed top-level check in `go test` output.
var failLine = regexp.MustCompile(`(?m)^    --- FAIL: TestFlawedStore/(\w+) `)

// TestFlawsAreCaught proves each check can fail: it runs the suite on a
// store with one flaw, in a child process, and wants exactly the checks
// that cover that flaw to fail.
func TestFlawsAreCaught(t *testing.T) {
	if os.Getenv(flawEnv) != "" {
		t.Skip("in a child process")
	}
	for name, tc := range flawCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"-test.run=^TestFlawedStore$", "-test.count=1"}
			if testing.Short() {
				args = append(args, "-test.short")
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
			cmd.Env = append(os.Environ(), flawEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store with flaw %s:\n%s", name, out)
			}
			var failed []string
			for _, m := range failLine.FindAllSubmatch(out, -1) {
				failed = append(failed, string(m[1]))
			}
			slices.Sort(failed)
			want := slices.Sorted(slices.Values(tc.fail))
			if !slices.Equal(failed, want) {
				t.Errorf("flaw %s failed checks %q, want %q; output:\n%s", name, failed, want, out)
			}
		})
	}
}
