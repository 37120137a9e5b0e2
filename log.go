package bgtask

import "log/slog"

// discardLogger is the default: the library is silent unless given a logger.
var discardLogger = slog.New(slog.DiscardHandler)
