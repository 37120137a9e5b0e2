// Package benchfloor is the floor the spawn benchmarks of the root module
// and of the bench module are read against: the plainest Go that keeps
// bgtask's promises by hand (see ByHand). Only benchmarks use it.
package benchfloor
