package bganthropic_test

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/bgtask/bgtask/internal/adaptertest"
)

// newScriptedModel starts a scripted model server answering path with
// replies, and a client of the SDK that talks to it.
func newScriptedModel(t *testing.T, path string, replies ...string) (*adaptertest.ScriptedModel, anthropic.Client) {
	t.Helper()
	sm := adaptertest.NewScriptedModel(t, path, replies...)
	client := anthropic.NewClient(option.WithBaseURL(sm.Server.URL), option.WithAPIKey("test"),
		option.WithHTTPClient(sm.Server.Client()), option.WithMaxRetries(0))
	return sm, client
}
