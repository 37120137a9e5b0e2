package pgstore

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bgtask/bgtask/store"
)

// settledChannel is the NOTIFY channel on which a row that became terminal
// or awaiting input is announced, by a trigger, in the commit that made it
// so, followed by the scope's suffix (scope.go; the trigger computes it); the payload is the task's id, then a space and its owner (left out
// when over 4,000 bytes: a NOTIFY payload has 8,000 at most).
const settledChannel = "bgtask_settled"

// settledFuncs are the functions registered with OnSettled.
type settledFuncs struct {
	mu    sync.Mutex // guards funcs and next
	funcs map[int]func(string, string)
	next  int
}

// OnSettled implements store.ChangeNotifier: f is called with the id and
// owner of each task whose row a commit made terminal or awaiting input, in any
// process on the database (the reaper's included), as the started Store's
// listening connection hears it (the one that hears cancel requests).
// What settled while the listener did not listen (its connection dropped,
// or notifications are off) is read from the database after it
// reconnects and every poll interval until it does: then f hears each
// terminal row and each posted notice (id "-", no instance named) since
// the last position, once, a poll interval late at most; a row that
// became awaiting input meanwhile is not told again (a waiter reads it
// every poll interval; the input request reaches an idle owner as a
// notice). A Store that was not started hears nothing: a waiter then
// reads the record every poll interval. f runs on the listener's or the
// poller's goroutine, one call at a time: it must not block.
func (s *Store) OnSettled(f func(id, owner string)) (stop func()) {
	s.settled.mu.Lock()
	defer s.settled.mu.Unlock()
	if s.settled.funcs == nil {
		s.settled.funcs = make(map[int]func(string, string))
	}
	k := s.settled.next
	s.settled.next++
	s.settled.funcs[k] = f
	return func() {
		s.settled.mu.Lock()
		defer s.settled.mu.Unlock()
		delete(s.settled.funcs, k)
	}
}

// SettledPollInterval implements store.ChangeNotifier: the poll interval
// (WithPollInterval).
func (s *Store) SettledPollInterval() time.Duration { return s.cfg.poll }

// notifySettled calls the registered functions with the id and owner a
// notification's payload names.
func (s *Store) notifySettled(payload string) {
	id, owner, _ := strings.Cut(payload, " ")
	if id == "-" { // a posted notice: "- <len>:<instance><owner>", passed on as "-<instance>", owner
		if n, rest, ok := strings.Cut(owner, ":"); ok {
			if k, err := strconv.Atoi(n); err == nil && k >= 0 && k <= len(rest) {
				id, owner = "-"+rest[:k], rest[k:]
			}
		}
	}
	s.tell(id, owner)
}

// tell calls the registered functions with id and owner.
func (s *Store) tell(id, owner string) {
	s.settled.mu.Lock()
	defer s.settled.mu.Unlock()
	for _, f := range s.settled.funcs {
		f(id, owner)
	}
}

var _ store.ChangeNotifier = (*Store)(nil)
