package bga2a

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
)

// ProtocolVersion is the A2A protocol version the server speaks, as its
// agent card says (JSON-RPC methods message/send, message/stream, tasks/get,
// tasks/cancel, tasks/resubscribe).
const ProtocolVersion = "0.3.0"

// AgentCardPath is where Server.Handler serves the agent card.
const AgentCardPath = "/.well-known/agent-card.json"

// Card is what the host says about its agent; the server completes it into
// the A2A agent card (protocol version, JSON-RPC transport, streaming
// capability, input and output modes). The zero value is not valid: Name is
// required.
type Card struct {
	// Name of the agent. Required.
	Name string
	// Description of what the agent does, for a client choosing an agent.
	Description string
	// URL of the JSON-RPC endpoint: where Server.Handler is mounted. Empty
	// means the root of the host the card request came to (its Host header);
	// a server behind a proxy or under a path prefix sets it.
	URL string
	// Version of the agent. Default "1.0.0".
	Version string
	// Skills the agent offers. Tags may be nil.
	Skills []a2a.AgentSkill
	// Provider of the agent, if any.
	Provider *a2a.AgentProvider
	// DocumentationURL, if any.
	DocumentationURL string
}

// agentCard builds the A2A card; url is used when c.URL is empty.
func (c Card) agentCard(url string) *a2a.AgentCard {
	if c.URL != "" {
		url = c.URL
	}
	version := c.Version
	if version == "" {
		version = "1.0.0"
	}
	skills := make([]a2a.AgentSkill, len(c.Skills))
	for i, s := range c.Skills {
		if s.Tags == nil {
			s.Tags = []string{}
		}
		skills[i] = s
	}
	return &a2a.AgentCard{
		Name:               c.Name,
		Description:        c.Description,
		URL:                url,
		Version:            version,
		ProtocolVersion:    ProtocolVersion,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
		Provider:           c.Provider,
		DocumentationURL:   c.DocumentationURL,
	}
}

func (c Card) validate() error {
	if blank(c.Name) {
		return errors.New("bga2a: the card needs a Name")
	}
	return nil
}

// serveCard answers GET (and OPTIONS, for browsers) with the agent card.
// The card is public: it names no owner and needs no authentication.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	card := s.card.agentCard(scheme + "://" + r.Host + "/")
	card.SecuritySchemes, card.Security = s.cfg.schemes, s.cfg.security
	b, err := json.Marshal(card)
	if err != nil {
		http.Error(w, "agent card", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
