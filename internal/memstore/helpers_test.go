package memstore

import (
	"github.com/bgtask/bgtask/internal/rectest"
)

// The shared record builders (internal/rectest), under this package's names.
var (
	rt0, rt1, rt2, rt3 = rectest.T0, rectest.T1, rectest.T2, rectest.T3
	rmeta              = rectest.Meta
	with               = rectest.With
	snapOf             = rectest.SnapOf
	fullMeta           = rectest.Full
)
