package bga2a

import "errors"

var (
	// ErrNoOwner is returned by New when neither WithOwner nor WithOwnerFunc
	// is given: the server never guesses whom a request acts for.
	ErrNoOwner = errors.New("bga2a: no owner: use WithOwner or WithOwnerFunc")
	// ErrClosed is the error of every request after Server.Close.
	ErrClosed = errors.New("bga2a: server closed")
)
