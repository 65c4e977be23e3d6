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
	// sawLogin: the request flight carried the login's record.
	sawLogin bool
	// conn is what outlives a flight.
	conn                tlsConn
	reqFirst, reqLast   int64
	respFirst, respLast int64
	reqBytes, respBytes int64
}

// tlsConn is the connection's TLS state that outlives a flight: whether
// the login is over, and the record walks of both directions.
type tlsConn struct {
	// loggedIn: the flight that carried the client's login is over: the
	// MySQL handshake response (user, authentication), its first record
	// of application data after its TLS Finished, answered by the
	// server's OK. A login is no statement: the server records none. The
	// mariadb CLI sends it in a flight of its own, other clients with
	// their Finished.
	loggedIn bool
	client   recordWalk
	server   recordWalk
	// ccs: the client sent its ChangeCipherSpec (TLS 1.2: its next record
	// is Finished); tls13: the server sent encrypted records during the
	// handshake (TLS 1.3); finished: the client's handshake went by.
	ccs, tls13, finished bool
}

// recordWalk follows one direction's TLS record boundaries across
// segments: the header read so far and the bytes left of the current
// record; lost after a gap.
type recordWalk struct {
	hdr     [5]byte
	hdrN    int
	recLeft int
	lost    bool
}

// next calls on with the type of each record that begins in data.
func (w *recordWalk) next(data []byte, on func(typ byte)) {
	for len(data) > 0 && !w.lost {
		if w.recLeft > 0 {
			n := min(w.recLeft, len(data))
			w.recLeft -= n
			data = data[n:]
			continue
		}
		n := copy(w.hdr[w.hdrN:], data)
		w.hdrN += n
		data = data[n:]
		if w.hdrN < len(w.hdr) {
			return
		}
		w.recLeft, w.hdrN = int(w.hdr[3])<<8|int(w.hdr[4]), 0
		on(w.hdr[0])
	}
}

// TLS record content types the walk tells apart.
const tlsChangeCipherSpec = 0x14

// clientBytes walks the client's records of one segment, reporting
// whether the login's record began in it. The client's handshake flight
// (ChangeCipherSpec, then in TLS 1.3 its Certificate, CertificateVerify
// and Finished, all encrypted as application data) is one write of its
// TLS library, so one segment; the login is the application's own write
// after it: in TLS 1.3 the first application data of a later segment, in
// TLS 1.2 the first application data after the record that follows
// ChangeCipherSpec (Finished).
func (c *tlsConn) clientBytes(data []byte) (login bool) {
	handshake := false // this segment is the client's handshake flight
	c.client.next(data, func(typ byte) {
		switch {
		case c.finished:
			login = login || typ == tlsApplicationData && !c.loggedIn
		case c.tls13 && (typ == tlsChangeCipherSpec || typ == tlsApplicationData):
			handshake = true
		case typ == tlsChangeCipherSpec:
			c.ccs = true
		case c.ccs:
			c.finished = true // TLS 1.2: this record is the client's Finished
		case typ == tlsApplicationData:
			// Application data with no handshake seen (a walk that started
			// late): taken as the login.
			c.finished, login = true, !c.loggedIn
		}
	})
	if handshake {
		c.finished = true
	}
	return login
}

// serverBytes walks the server's records: encrypted ones before the
// client finished mean TLS 1.3.
func (c *tlsConn) serverBytes(data []byte) {
	if c.finished {
		return
	}
	c.server.next(data, func(typ byte) {
		if typ == tlsApplicationData {
			c.tls13 = true
		}
	})
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
		if tf.conn.clientBytes(data) || tf.conn.client.lost && tf.app {
			tf.sawLogin = true
		}
		tf.reqLast = tsUS
		tf.reqBytes += int64(len(data))
		return
	}
	tf.conn.serverBytes(data)
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
func (tf *tlsFlights) gap() { tf.app, tf.conn.client.lost, tf.conn.server.lost = false, true, true }

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
		tf.conn.loggedIn = tf.sawLogin
		return // the TLS handshake, or the login
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
