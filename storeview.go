package bgtask

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Runtime returns the view of m that a durable store's Start takes
// (st.Start(ctx, m.Runtime())): what the store calls to carry out, on this
// Manager, what other processes asked for (a cancel, a message, a run's
// stop), to cancel everything when this instance lost its registration,
// to name owners with notices to take, and to read its tasks' outputs for
// readers on other instances. It implements store.Runtime,
// store.RunCancelHandler, store.OwnerNotifier and store.OutputHandler. It
// is the stores' door, not a host's: a host cancels, sends and stops
// through the Manager and its Owners. Safe for concurrent use; every call on it after Shutdown
// does nothing, or fails as the Manager's own call would.
func (m *Manager) Runtime() store.Runtime { return storeView{m} }

// storeView is the store-facing view of a Manager (Manager.Runtime), kept
// off the Manager's method set so that an agent builder's page shows only
// what an agent builder calls.
type storeView struct{ m *Manager }

var (
	_ store.Runtime          = storeView{}
	_ store.RunCancelHandler = storeView{}
	_ store.OwnerNotifier    = storeView{}
	_ store.OutputHandler    = storeView{}
)

func (r storeView) Instance() string { return r.m.Instance() }

func (r storeView) CancelRequested(ctx context.Context, id string, tree bool, reason string) (int, error) {
	return r.m.cancelRequested(ctx, id, tree, reason)
}

func (r storeView) CancelAll(cause error) int { return r.m.cancelAll(cause) }

func (r storeView) MessageRequested(ctx context.Context, owner, id string, msg bgtype.Message) store.Delivery {
	return r.m.messageRequested(ctx, owner, id, msg)
}

func (r storeView) RunCancelRequested(ctx context.Context, owner, run, reason string) int {
	return r.m.runCancelRequested(ctx, owner, run, reason)
}

func (r storeView) OwnersNoticed(owners []string) { r.m.ownersNoticed(owners) }

func (r storeView) OutputRequested(ctx context.Context, owner, id string, req store.OutputRequest) store.Delivery {
	return r.m.outputRequested(ctx, owner, id, req)
}
