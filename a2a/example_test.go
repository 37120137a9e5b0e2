package bga2a_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

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

// A host that authenticates with bearer tokens declares the scheme in the
// card. The check is the host's: here a middleware that verifies the token
// and puts its user in the request's context, where the owner function
// reads it. A request without a valid token never reaches the server.
func ExampleWithSecurityScheme() {
	tokens := map[string]string{"token-of-alice": "alice"} // a stand-in for real token verification
	type userKey struct{}
	m, _ := bgtask.New()
	srv, err := bga2a.New(m, summarize, bga2a.Card{Name: "summarizer"},
		bga2a.WithSecurityScheme("bearer", a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}),
		bga2a.WithOwnerFunc(func(r *http.Request) (string, error) {
			if user, ok := r.Context().Value(userKey{}).(string); ok {
				return user, nil
			}
			return "", errors.New("unauthenticated")
		}))
	if err != nil {
		panic(err)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == bga2a.AgentCardPath { // the card is public
				next.ServeHTTP(w, r)
				return
			}
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			user, known := tokens[token]
			if !ok || !known {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		})
	}
	hs := httptest.NewServer(auth(srv.Handler()))
	defer func() {
		_ = m.Shutdown(context.Background())
		srv.Close()
		hs.Close()
	}()

	ctx := context.Background()
	card, _ := agentcard.DefaultResolver.Resolve(ctx, hs.URL)
	for name, scheme := range card.SecuritySchemes {
		fmt.Printf("%s: %+v, required: %v\n", name, scheme, card.Security)
	}
	resp, _ := http.Post(hs.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	resp.Body.Close()
	fmt.Println("without a token:", resp.Status)

	hc := &http.Client{Transport: bearer{"token-of-alice"}}
	client, _ := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "a memo"}),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("with a token:", res.(*a2a.Task).Status.State)
	// Output:
	// bearer: {BearerFormat: Description: Scheme:Bearer}, required: [map[bearer:[]]]
	// without a token: 401 Unauthorized
	// with a token: completed
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
