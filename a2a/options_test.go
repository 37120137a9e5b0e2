package bga2a

import (
	"testing"

	"github.com/bgtask/bgtask"
)

func TestNewRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	card := Card{Name: "agent"}
	tests := []struct {
		name  string
		m     *bgtask.Manager
		agent bgtask.Func
		card  Card
		opts  []Option
		want  string
	}{
		{"nil manager", nil, echoAgent, card, []Option{WithOwner("a")}, "bga2a: nil Manager"},
		{"nil agent", m, nil, card, []Option{WithOwner("a")}, "bgtask: invalid argument: nil agent function"},
		{"no name", m, echoAgent, Card{Name: " "}, []Option{WithOwner("a")}, "bga2a: the card needs a Name"},
		{"no owner", m, echoAgent, card, nil, "bga2a: no owner: use WithOwner or WithOwnerFunc"},
		{"blank owner", m, echoAgent, card, []Option{WithOwner(" \t")}, "bga2a: WithOwner: bgtask: owner id is empty"},
		{"nil owner func", m, echoAgent, card, []Option{WithOwnerFunc(nil)}, "bga2a: WithOwnerFunc: nil function"},
		{"parts", m, echoAgent, card, []Option{WithOwner("a"), WithMaxParts(0)}, "bga2a: WithMaxParts(0): must be at least 1"},
		{"message", m, echoAgent, card, []Option{WithOwner("a"), WithMaxMessageBytes(-1)}, "bga2a: WithMaxMessageBytes(-1): must be at least 1"},
		{"artifact", m, echoAgent, card, []Option{WithOwner("a"), WithMaxArtifactBytes(0)}, "bga2a: WithMaxArtifactBytes(0): must be at least 1"},
		{"request", m, echoAgent, card, []Option{WithOwner("a"), WithMaxRequestBytes(0)}, "bga2a: WithMaxRequestBytes(0): must be at least 1"},
	}
	for _, tt := range tests {
		srv, err := New(tt.m, tt.agent, tt.card, tt.opts...)
		if err == nil || err.Error() != tt.want || srv != nil {
			t.Errorf("%s: New = %v, %v; want nil, %q", tt.name, srv, err, tt.want)
		}
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789abcdefghijklmnopqrstuvwxyz0123456789", 40, "0123456789…[truncated: 46 bytes total]"},
		{"ééééééééééééééééééééé", 37, "ééé…[truncated: 42 bytes total]"}, // not half a rune,
	}
	for _, tt := range tests {
		got := cut(tt.in, tt.max)
		if got != tt.want || len(got) > tt.max {
			t.Errorf("cut(%q, %d) = %q (%d bytes), want %q", tt.in, tt.max, got, len(got), tt.want)
		}
	}
}
