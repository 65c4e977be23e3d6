package join

import "github.com/gapscope/gapscope/internal/event"

// zeroWindows returns the client zero-window spans the capture recorded for
// the statement: the intervals in which the server could not send.
func zeroWindows(s *event.Statement) []event.Span { return s.ZeroWindows }
