// Package bytecache is a map bounded in bytes that forgets its oldest
// entries first: the protocol servers keep whole task results in one, past
// the record's cap, for as long as the room allows.
package bytecache
