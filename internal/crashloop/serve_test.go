package crashloop

import (
	"bufio"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// One process, never killed: Serve spawns its whole budget (plain tasks,
// sub-agents and their children), hands each end to the model exactly
// once, logs each commit of a mark as a step's "taking" line, and on
// "finish" prints "done" once every record ended.
func TestServeHandsOutEachEndOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log")
	outR, outW := io.Pipe()
	log, err := OpenLog(path, outW, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Seen through another type, the MemoryStore is "durable": the Plugin marks.
	store := &loggedStore{Store: memstore.New(), log: log}
	m, err := bgtask.New(bgtask.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(t.Context())
	inR, inW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- Serve(t.Context(), Config{Manager: m, Log: log, Owner: "o", Seed: 7, Plain: 6, Agents: 2, Child: 3, In: inR})
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	next := func(want func(string) bool) {
		t.Helper()
		for sc.Scan() {
			if want(sc.Text()) {
				return
			}
		}
		t.Fatalf("output ended: %v", <-served)
	}
	next(func(l string) bool { return l == "ready" })
	next(func(l string) bool { return l == "idle" })
	if _, err := io.WriteString(inW, "finish\n"); err != nil {
		t.Fatal(err)
	}
	next(func(l string) bool { return strings.HasPrefix(l, "done ") })
	inW.Close()
	go io.Copy(io.Discard, outR) // until Serve returns and closes it
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	recs, err := Tree(t.Context(), StoreLister(store), "o")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	v := Judge("o", recs, []ProcLog{{Name: "p", Lines: lines}})
	if want := map[string]int{KindPlain: 6, KindSubAgent: 2, KindChild: 6}; !maps.Equal(v.Kinds, want) || v.Took != 14 {
		t.Errorf("kinds %v, %d handed out; want %v, 14", v.Kinds, v.Took, want)
	}
	if err := v.Err(); err != nil {
		t.Error(err)
	}
	takings := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "taking ") {
			takings++
		}
	}
	if takings != 14 {
		t.Errorf("%d taking lines, want one per end (14)", takings)
	}
}

// loggedStore is a MemoryStore whose marks are logged, as a helper's store.
type loggedStore struct {
	*memstore.Store
	log *Log
}

func (s *loggedStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	done := s.log.Commit(ctx, actions)
	err := s.Store.Commit(ctx, owner, actions...)
	done(err)
	return err
}
