package capture

import "github.com/gapscope/gapscope/internal/event"

func statementSpans(s *event.Statement) []event.Span { return s.ZeroWindows }
