package pgstore

// SetListPage sets how many rows a page of ReadOnly.List reads, and
// returns a function that restores it.
func SetListPage(n int) func() {
	old := listPage
	listPage = n
	return func() { listPage = old }
}
