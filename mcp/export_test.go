package bgmcp

// SetListPageSize sets the tasks/list page size until the returned
// function restores it.
func SetListPageSize(n int) (restore func()) {
	old := listPageSize
	listPageSize = n
	return func() { listPageSize = old }
}
