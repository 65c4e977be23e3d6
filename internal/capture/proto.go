package capture

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// The decoder entry points the tracker uses, in one place.

func newMySQLDecoder(h mysqlproto.Handler, o mysqlproto.Options) connDecoder {
	return mysqlproto.NewConnDecoder(h, o)
}

func looksLikeGreeting(b []byte) bool { return mysqlproto.LooksLikeGreeting(b) }
func looksLikeCommand(b []byte) bool  { return mysqlproto.LooksLikeCommand(b) }
func interpolateParams(dst, sql []byte, params [][]byte) []byte {
	return mysqlproto.InterpolateParams(dst, sql, params)
}

// setStalls records the client's receive-window stalls on s.
func setStalls(s *event.Statement, spans []event.Span, total int64) {
	s.ZeroWindowUS = total
	s.ZeroWindows = spans
}
