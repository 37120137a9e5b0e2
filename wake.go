package bgtask

import "github.com/bgtask/bgtask/bgtype"

// route reports whether an event of kind k (and custom type typ) from a
// task with policy p goes to the owner's inbox, and if so whether it goes
// quiet (it does not wake the owner).
func route(p bgtype.WakePolicy, k bgtype.EventKind, typ string) (send, quiet bool) {
	switch {
	case k == bgtype.EventCommitFailed, k == bgtype.EventCustom && typ == bgtype.EventTypeMessage:
		return true, false // the owner must hear of these whatever the policy
	case p == bgtype.WakeSilent:
		return false, false
	case k == bgtype.EventCustom:
		return true, p != bgtype.WakeOnActivity
	}
	return true, false // terminal events and input requests
}

// WithWake sets the task's wake policy. Default WakeOnTerminal. An unknown
// policy makes the spawn fail with ErrInvalidArgument.
func WithWake(p bgtype.WakePolicy) SpawnOption { return func(c *spawnConfig) { c.wake = p } }
