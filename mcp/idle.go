package bgmcp

import "time"

// The idle timeout of HTTP sessions (WithSessionTimeout) is the Server's,
// not the SDK's: the SDK pauses its timer only while a POST runs, so a
// client listening on its GET stream (where a task's progress goes) would
// see its session end under it. Here every HTTP request of a session that
// is in flight, the GET stream included, keeps it open; the timer runs
// only while none is.

// enter counts an HTTP request of the session id as in flight, until the
// returned leave is called. An unknown session (the SDK answers 404 for
// it) counts nothing.
func (s *Server) enter(id string) (leave func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil || sess.ss == nil {
		return func() {}
	}
	sess.active++
	if sess.idle != nil {
		sess.idle.Stop()
		sess.idle = nil
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sess.active--
		s.armLocked(sess)
	}
}

// opened ends the count of the request that opened the session id (track
// counted it), once its response is written.
func (s *Server) opened(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[id]; sess != nil && sess.ss != nil && sess.opening {
		sess.opening = false
		sess.active--
		s.armLocked(sess)
	}
}

// armLocked starts the idle timer of a session that has no request in
// flight. When it fires, unless a request came meanwhile, the session is
// closed (and then forgotten, see track). s.mu is held.
func (s *Server) armLocked(sess *session) {
	if sess.active > 0 || sess.idle != nil || sess.gone {
		return
	}
	ss := sess.ss
	var t *time.Timer
	t = time.AfterFunc(s.cfg.sessionTimeout, func() {
		s.mu.Lock()
		fire := sess.idle == t // not stopped by a request meanwhile
		if fire {
			sess.idle = nil
		}
		s.mu.Unlock()
		if fire {
			_ = ss.Close()
		}
	})
	sess.idle = t
}
