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
	state uint8 // 0 idle, 1 request in flight, 2 response in flight
	app   bool  // the request flight starts with application data
	// sawApp: the request flight carried application data (a record of
	// type 0x17 anywhere in it, found by walking the records).
	sawApp bool
	// conn is what outlives a flight.
	conn                tlsConn
	reqFirst, reqLast   int64
	respFirst, respLast int64
	reqBytes, respBytes int64
}

// tlsConn is the connection's TLS state that outlives a flight: whether
// the login is over, and where the client's byte stream is among its
// records.
type tlsConn struct {
	// loggedIn: the flight that carried the client's first application
	// data is over. That data is the handshake response (user,
	// authentication), answered by the server's OK: a login, which the
	// server never records as a statement. The mariadb CLI sends it in the
	// flight of its TLS Finished, pymysql in a flight of its own.
	loggedIn bool
	// The record walk over the client's bytes: the header read so far,
	// the bytes left of the current record; lost after a gap.
	hdr     [5]byte
	hdrN    int
	recLeft int
	lost    bool
}

// walk reads the client's record headers in data, reporting whether one
// is application data.
func (c *tlsConn) walk(data []byte) (app bool) {
	for len(data) > 0 && !c.lost {
		if c.recLeft > 0 {
			n := min(c.recLeft, len(data))
			c.recLeft -= n
			data = data[n:]
			continue
		}
		n := copy(c.hdr[c.hdrN:], data)
		c.hdrN += n
		data = data[n:]
		if c.hdrN == len(c.hdr) {
			app = app || c.hdr[0] == tlsApplicationData
			c.recLeft, c.hdrN = int(c.hdr[3])<<8|int(c.hdr[4]), 0
		}
	}
	return app
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
			*tf = tlsFlights{state: 1, app: data[0] == tlsApplicationData, reqFirst: tsUS, conn: tf.conn}
		}
		if tf.conn.walk(data) || tf.conn.lost && tf.app {
			tf.sawApp = true
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

// gap: lost bytes; the flight in progress can no longer be classified,
// nor the records after it walked.
func (tf *tlsFlights) gap() { tf.app, tf.conn.lost = false, true }

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
	if !tf.conn.loggedIn {
		tf.conn.loggedIn = tf.sawApp
		return // the TLS handshake, or the login its first application data carries
	}
	if !tf.app {
		return // a later handshake flight
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
