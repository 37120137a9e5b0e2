package bga2a_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/bgtask/bgtask"
	bga2a "github.com/bgtask/bgtask/a2a"
)

// The sub-agent reads its first message from its inbox and answers it.
func summarize(ctx context.Context, t *bgtask.Task) (any, error) {
	for {
		if err := t.Inbox().Wait(ctx); err != nil {
			return nil, err
		}
		for _, ev := range t.Inbox().Drain() {
			if msg, ok := ev.Message(); ok {
				_ = t.Emit("progress", map[string]int{"percent": 50})
				return "summary of: " + msg.Content, nil
			}
		}
	}
}

func Example() {
	m, _ := bgtask.New()
	srv, err := bga2a.New(m, summarize,
		bga2a.Card{Name: "summarizer", Description: "Summarizes a text."},
		// The owner comes from the request's authentication, never from the message.
		bga2a.WithOwnerFunc(func(r *http.Request) (string, error) {
			if user, _, ok := r.BasicAuth(); ok { // a stand-in for real authentication
				return user, nil
			}
			return "", errors.New("unauthenticated")
		}))
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		_ = m.Shutdown(context.Background())
		srv.Close()
		hs.Close()
	}()

	// A client, here a2a-go's, reads the card and sends a message.
	ctx := context.Background()
	hc := &http.Client{Transport: basicAuth{"alice"}}
	card, _ := agentcard.NewResolver(hc).Resolve(ctx, hs.URL)
	client, _ := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "a long report"}),
	})
	if err != nil {
		panic(err)
	}
	task := res.(*a2a.Task)
	fmt.Println(card.Name, card.ProtocolVersion, card.Capabilities.Streaming)
	fmt.Println(task.Status.State, task.Artifacts[0].Parts[0].(a2a.TextPart).Text)
	// Output:
	// summarizer 0.3.0 true
	// completed summary of: a long report
}

type basicAuth struct{ user string }

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, "")
	return http.DefaultTransport.RoundTrip(r)
}
