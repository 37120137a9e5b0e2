package bgtask

import (
	"math"
	"sync"
	"sync/atomic"
)

// memRetain runs the retention of a MemoryStore one trimmer at a time, with
// no shard locked, after the commits that call for it. A commit that finds
// the trimmer busy leaves its request on a lock-free stack; the busy trimmer
// takes it before it gives up the lock, so no request is left behind and no
// commit waits for another's retention.
type memRetain struct {
	mu      sync.Mutex // held by the one trimmer; only ever TryLocked
	pending atomic.Pointer[memRetainReq]
}

// memRetainReq is a commit's request for retention.
type memRetainReq struct {
	owner string
	tx    memTx
	next  *memRetainReq
}

// retain applies retention after a commit of owner's records: it forgets
// the owner's terminal records beyond the count limit, then, across all
// owners, those beyond the age limit and the total limit, oldest first.
// Only a commit that ended a task or read the clock can have put the store
// over a limit. If another goroutine is trimming, it trims for this commit
// too, and retain returns at once.
func (s *MemoryStore) retain(owner string, tx *memTx) {
	if !tx.ended && tx.clock.IsZero() {
		return
	}
	r := &s.ret
	if r.mu.TryLock() {
		s.trimFor(owner, tx)
	} else {
		req := &memRetainReq{owner: owner, tx: *tx}
		for {
			req.next = r.pending.Load()
			if r.pending.CompareAndSwap(req.next, req) {
				break
			}
		}
		if !r.mu.TryLock() {
			return // the trimmer takes req before it unlocks
		}
	}
	for {
		for req := r.pending.Swap(nil); req != nil; req = req.next {
			s.trimFor(req.owner, &req.tx)
		}
		r.mu.Unlock()
		if r.pending.Load() == nil || !r.mu.TryLock() {
			return
		}
	}
}

// trimFor is the retention after one commit; the trimmer's lock is held.
func (s *MemoryStore) trimFor(owner string, tx *memTx) {
	if tx.ended {
		s.trim(func(sh *memShard) *memList {
			if o := sh.owners[owner]; o != nil {
				return &o.done
			}
			return nil
		}, ownLinks, s.retainPerOwner, 0)
	}
	var cutoff int64
	if s.retainFor > 0 && !tx.clock.IsZero() {
		cutoff = tx.clock.Add(-s.retainFor).UnixNano()
	}
	if s.ndone.Load() <= int64(s.retainTotal) && s.oldest.Load() >= cutoff {
		return // within both limits: no need to look at every shard
	}
	s.trim(func(sh *memShard) *memList { return &sh.done }, storeLinks, s.retainTotal, cutoff)
	s.oldest.Store(math.MaxInt64) // every head is now at or after cutoff
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		if h := sh.done.head; h != nil {
			s.noteTerminal(h.rec.at)
		}
		sh.mu.RUnlock()
	}
}

// noteTerminal lowers the store's bound on the oldest terminal commit time
// to at, if it is lower.
func (s *MemoryStore) noteTerminal(at int64) {
	for {
		old := s.oldest.Load()
		if at >= old || s.oldest.CompareAndSwap(old, at) {
			return
		}
	}
}

// trim forgets the oldest terminal records of the lists that list returns
// (one per shard, nil for none) while there are more than limit of them
// in all, or the oldest was committed terminal before cutoff (Unix nanos;
// 0 for no age limit). Each list is in commit order, so the oldest of all
// is the head with the lowest seq. It reads each shard's head and count
// under the read lock, then drops under the write lock of one shard at a
// time. Only the trimmer drops terminal records (but for a Remove), and
// commits only add, so the count read is never more than the true one.
func (s *MemoryStore) trim(list func(*memShard) *memList, links func(*memEntry) *memLinks, limit int, cutoff int64) {
again:
	var heads [memShards]*memEntry
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		if l := list(sh); l != nil {
			heads[i], n = l.head, n+l.n
		}
		sh.mu.RUnlock()
	}
	for {
		oldest := -1
		for i, h := range heads {
			if h != nil && (oldest < 0 || h.rec.seq < heads[oldest].rec.seq) {
				oldest = i
			}
		}
		if oldest < 0 || n <= limit && heads[oldest].rec.at >= cutoff {
			return
		}
		sh := &s.shards[oldest]
		sh.mu.Lock()
		l := list(sh)
		if l == nil || l.head != heads[oldest] {
			sh.mu.Unlock()
			goto again // a Remove took it meanwhile: count again
		}
		e := l.head
		heads[oldest] = links(e).next
		sh.drop(s, e)
		n--
		sh.mu.Unlock()
	}
}
