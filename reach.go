package bgtask

// reach is whose tasks a call may touch (a cancel, a wait): one owner's (an
// Owner view, the tools, a plugin), or every owner's (the Manager's own
// calls, the administrator's path). It is a type rather than an owner
// string, so that no owner id, "" included, can mean every owner; its zero
// value reaches no task.
type reach struct {
	owner string // the one owner, unless every
	every bool
}

// everyOwner is the reach of the Manager's own calls.
var everyOwner = reach{every: true}

// ownerReach is the reach of one owner's calls.
func ownerReach(owner string) reach { return reach{owner: owner} }

// covers reports whether a task of owner is within r.
func (r reach) covers(owner string) bool { return r.every || owner == r.owner }
