package bgmcp

// SetListPageSize sets the tasks/list page size until the returned
// function restores it.
func SetListPageSize(n int) (restore func()) {
	old := listPageSize
	listPageSize = n
	return func() { listPageSize = old }
}

// KnownOwners returns how many owners s keeps a restore mark for.
func KnownOwners(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.restored)
}
