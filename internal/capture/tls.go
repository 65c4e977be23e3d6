package capture

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// TLS record content types (first byte of a record).
const tlsApplicationData = 0x17

// tlsFlights times an encrypted connection by direction: MySQL being half
// duplex, a client flight (bytes client->server until the server answers)
// is one request and the server flight that follows is its response.
// Flights that are TLS handshake records are not statements.
type tlsFlights struct {
	state               uint8 // 0 idle, 1 request in flight, 2 response in flight
	app                 bool  // the request flight starts with application data
	reqFirst, reqLast   int64
	respFirst, respLast int64
	reqBytes, respBytes int64
}

// startTLS switches the flow from the decoder to flight timing: after the
// SSL request every byte is encrypted.
func (f *flow) startTLS() {
	f.inTLS = true
	f.t.stats.TLSFlows++
}

func (tf *tlsFlights) bytes(f *flow, dir mysqlproto.Direction, tsUS int64, data []byte) {
	if dir == toServer {
		if tf.state == 2 {
			tf.emit(f, tsUS)
		}
		if tf.state == 0 {
			*tf = tlsFlights{state: 1, app: data[0] == tlsApplicationData, reqFirst: tsUS}
		}
		tf.reqLast = tsUS
		tf.reqBytes += int64(len(data))
		return
	}
	if tf.state == 0 {
		return // unsolicited (session tickets, alerts): not a response
	}
	if tf.state == 1 {
		tf.state, tf.respFirst = 2, tsUS
	}
	tf.respLast = tsUS
	tf.respBytes += int64(len(data))
}

// gap: lost bytes; the flight in progress can no longer be classified.
func (tf *tlsFlights) gap() { tf.app = false }

func (tf *tlsFlights) close(f *flow, tsUS int64) {
	if tf.state != 0 {
		tf.emit(f, tsUS)
	}
}

// emit turns the finished request/response pair into a statement.
func (tf *tlsFlights) emit(f *flow, tsUS int64) {
	defer func() { tf.state = 0 }()
	retrans := f.retrans
	f.retrans = 0
	if !tf.app {
		return // TLS handshake flight
	}
	var info *mysqlproto.ConnInfo
	if f.dec != nil {
		info = f.dec.Info()
	}
	s := f.newStatement(info)
	s.Cmd = "TLS"
	setTimes(s, tf.reqFirst, tf.reqLast, tf.respFirst, tf.respLast)
	s.ReqBytes, s.RespBytes, s.Retransmits = tf.reqBytes, tf.respBytes, retrans
	if tf.respLast != 0 {
		spans, total := f.win.stalls(tf.reqLast, tf.respLast)
		setStalls(s, spans, total)
	} else {
		s.Notes = addNote(s.Notes, noteIncomplete)
		rootCause(s, event.Incomplete)
	}
	s.Notes = addNote(s.Notes, noteTLS)
	rootCause(s, event.TLS)
	f.t.stats.Statements++
	f.t.emit(s)
}
