package bga2a_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
	bga2a "github.com/bgtask/bgtask/a2a"
)

// serve serves summarize (a bgtask.Func that reads its messages from t.Inbox())
// as an A2A agent on addr; ownerOf names the owner of a request from its authentication.
func serve(m *bgtask.Manager, addr string, summarize bgtask.Func, ownerOf func(*http.Request) (string, error)) error {
	srv, err := bga2a.New(m, summarize,
		bga2a.Card{Name: "summarizer", Description: "Summarizes a text.",
			Skills: []a2a.AgentSkill{{ID: "summarize", Name: "summarize", Description: "Summarizes a text."}}},
		bga2a.WithOwnerFunc(ownerOf))
	if err != nil {
		return err
	}
	defer srv.Close()
	return http.ListenAndServe(addr, srv.Handler())
}

// The README's "A2A": serve builds the server and listens; here on an
// address that cannot be listened on, so it returns at once (Example runs
// the same server end to end with a2a-go's client).
func Example_readme() {
	m, err := bgtask.New()
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(context.Background())
	ownerOf := func(r *http.Request) (string, error) {
		if user, _, ok := r.BasicAuth(); ok { // a stand-in for real authentication
			return user, nil
		}
		return "", errors.New("unauthenticated")
	}
	fmt.Println(serve(m, "127.0.0.1:-1", summarize, ownerOf))
	// Output: listen tcp: address -1: invalid port
}
