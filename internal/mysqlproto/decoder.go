package mysqlproto

// Notes attached to exchanges (static strings: no allocation).
const (
	noteMidStream      = "mid-stream: resynchronised on a client command"
	noteResync         = "resync after gap"
	noteCutShort       = "response cut short by the next command"
	noteGap            = "gap: bytes lost"
	noteClosed         = "connection closed before the response completed"
	noteLocalInfile    = "local infile"
	noteUnknownStmt    = "statement prepared before the capture: no text or params"
	noteParamTypes     = "param types unknown: params not decoded"
	noteParamsBad      = "params malformed: not decoded"
	noteTruncated      = "request larger than the buffer limit: text truncated"
	noteBadCompressed  = "compressed packet did not inflate"
	noteTooManyPending = "too many pipelined commands"
	noteMalformed      = "malformed response"
	noteZstd           = "zstd compression: not decoded"
)

// Defaults and bounds.
const (
	defaultMaxBuffered = 64 << 20
	serverKeep         = 64 << 10 // server packets are parsed from their first bytes only
	maxPipeline        = 64
	maxStatements      = 16384
)

type phase uint8

const (
	phaseGreeting phase = iota // waiting for the server's handshake
	phaseLogin                 // waiting for the client's handshake response
	phaseAuth                  // authentication until the server's OK or ERR
	phaseCommand               // command phase
	phaseStream                // a replica's binlog stream: packets counted until an EOF or ERR
	phaseOpaque                // TLS, refused login, COM_QUIT, zstd: nothing more to decode
)

// eofMode is whether result sets carry EOF packets. It comes from the
// handshake, or is learned from the first result set after a mid-stream
// start.
type eofMode uint8

const (
	eofUnknown eofMode = iota
	eofClassic
	eofDeprecated
)

// ConnDecoder decodes the two byte streams of one MySQL/MariaDB connection
// into Exchanges. It is not safe for concurrent use.
type ConnDecoder struct {
	h        Handler
	opts     Options
	info     ConnInfo
	cli, srv stream
	phase    phase
	resync   bool
	note     string // for the next exchange created
	eof      eofMode

	queue []*pending // commands awaiting a response, oldest first
	free  []*pending

	stmts     map[uint32]*stmtInfo
	freeStmts []*stmtInfo
	lastStmt  uint32

	// client messages longer than one packet are assembled here
	asm      []byte
	asmOn    bool
	asmLen   int
	asmFirst int64
	asmWire  int64
	asmSeq   byte

	srvCont     bool // the next server packet continues a 16 MiB one
	swallowEnd  bool // the next server packet may be a trailing EOF of an exchange already emitted
	loginUser   []byte
	loginDB     []byte
	loginPlugin []byte
	attrs       pending // scratch for MySQL 8 query attributes, rendered and dropped
	// touched keeps what touchLines read, so that its loads stay in the
	// program.
	touched byte
}

// NewConnDecoder returns a decoder that hands each completed exchange to h.
func NewConnDecoder(h Handler, opts Options) *ConnDecoder {
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = defaultMaxBuffered
	}
	d := &ConnDecoder{h: h, opts: opts, stmts: map[uint32]*stmtInfo{}}
	d.cli = stream{d: d, dir: ClientToServer}
	d.srv = stream{d: d, dir: ServerToClient}
	if opts.MidStream {
		d.enterResync(noteMidStream)
	}
	return d
}

// Info returns what the handshake told us; the decoder keeps it up to date
// (COM_INIT_DB, COM_CHANGE_USER, session tracking).
func (d *ConnDecoder) Info() *ConnInfo { return &d.info }

// Feed hands the decoder in-order TCP payload bytes of one direction,
// captured at tsUS. data is only read during the call.
func (d *ConnDecoder) Feed(dir Direction, tsUS int64, data []byte) {
	if len(data) == 0 || d.phase == phaseOpaque {
		return
	}
	if d.resync {
		if dir != ClientToServer || !d.tryResync(data) {
			return
		}
	}
	d.stream(dir).feed(data, tsUS)
}

// Gap tells the decoder bytes were lost in dir: whatever is pending is
// emitted as Incomplete and the decoder waits for the next client command.
func (d *ConnDecoder) Gap(dir Direction, tsUS int64) {
	if d.phase == phaseOpaque {
		return
	}
	d.flushPending(noteGap)
	d.enterResync(noteResync)
}

// Close emits whatever is pending as Incomplete: the connection ended.
func (d *ConnDecoder) Close(tsUS int64) {
	d.flushPending(noteClosed)
	d.phase = phaseOpaque
}

func (d *ConnDecoder) stream(dir Direction) *stream {
	if dir == ClientToServer {
		return &d.cli
	}
	return &d.srv
}

// enterResync drops framing state and ignores bytes until a client chunk
// starts with a well-formed command.
func (d *ConnDecoder) enterResync(note string) {
	d.cli.reset()
	d.srv.reset()
	d.asmOn, d.srvCont, d.swallowEnd = false, false, false
	d.resync = true
	d.note = note
}

// lostFraming is called when bytes stop making sense mid-stream.
func (d *ConnDecoder) lostFraming(note string) {
	d.flushPending(note)
	d.enterResync(noteResync)
}

// tryResync accepts a client chunk that starts with a plausible command.
func (d *ConnDecoder) tryResync(data []byte) bool {
	compressed := false
	switch {
	case !d.info.Compressed && LooksLikeCommand(data):
	case looksLikeCompressedCommand(data):
		compressed = true
	default:
		return false
	}
	d.cli.reset()
	d.srv.reset()
	d.cli.compressed, d.srv.compressed = compressed, compressed
	d.info.Compressed = d.info.Compressed || compressed
	d.resync = false
	d.phase = phaseCommand
	return true
}

// keepFor says how much of a packet's payload a framer must retain when the
// packet is split across feeds.
func (d *ConnDecoder) keepFor(dir Direction, length int) int {
	if dir == ServerToClient {
		if d.phase == phaseStream {
			return min(length, 1) // a binlog event's type byte says whether the stream ended
		}
		return min(length, serverKeep)
	}
	if h := d.head(); h != nil && h.st == rsInfileData {
		return min(length, 1) // file contents are only counted
	}
	return min(length, d.opts.MaxBuffered)
}

// onPacket routes a framed packet by connection phase.
func (d *ConnDecoder) onPacket(dir Direction, p *packet) {
	switch d.phase {
	case phaseCommand:
		if dir == ClientToServer {
			d.clientPacket(p)
		} else {
			d.serverPacket(p)
		}
	case phaseStream:
		if dir == ServerToClient {
			d.streamPacket(p)
		} // the client's packets are a semi-synchronous replica's acknowledgements
	case phaseGreeting, phaseLogin, phaseAuth:
		d.handshakePacket(dir, p)
	}
}

// clientPacket assembles client messages that span several packets (a
// payload of 16 MiB or more) and hands complete ones on.
func (d *ConnDecoder) clientPacket(p *packet) {
	if d.asmOn {
		if room := d.opts.MaxBuffered - len(d.asm); room > 0 {
			d.asm = append(d.asm, p.payload[:min(len(p.payload), room)]...)
		}
		d.asmLen += p.length
		d.asmWire += p.wire
		if p.length == maxPacket {
			return
		}
		d.asmOn = false
		m := packet{payload: d.asm, length: d.asmLen, seq: d.asmSeq, first: d.asmFirst, last: p.last, wire: d.asmWire}
		d.clientMessage(&m)
		if cap(d.asm) > bigBuffer {
			d.asm = nil
		}
		return
	}
	if p.length == maxPacket && !d.absorbing(p) {
		d.asmOn = true
		d.asm = append(d.asm[:0], p.payload...)
		d.asmLen, d.asmFirst, d.asmWire, d.asmSeq = p.length, p.first, p.wire, p.seq
		return
	}
	d.clientMessage(p)
}

// absorbing reports whether a client packet is data for the command in
// progress (LOCAL INFILE contents, COM_CHANGE_USER auth) rather than a new
// command. Such packets continue a sequence, so their id is never 0.
func (d *ConnDecoder) absorbing(p *packet) bool {
	h := d.head()
	return h != nil && (h.st == rsInfileData || h.st == rsAuth) && p.seq != 0
}

// clientMessage handles one complete client message in the command phase.
func (d *ConnDecoder) clientMessage(m *packet) {
	if h := d.head(); h != nil && d.absorbing(m) {
		h.ex.ReqBytes += m.wire
		if h.st == rsInfileData && m.length == 0 {
			h.st = rsFirst // the file is complete: the LOAD's own result follows
		}
		return
	}
	if m.seq != 0 || m.length == 0 || len(m.payload) == 0 {
		d.lostFraming(noteGap)
		return
	}
	if h := d.head(); h != nil && h.ex.RespFirst != 0 {
		d.finishIncomplete(h, noteCutShort)
	}
	if len(d.queue) >= maxPipeline {
		d.finishIncomplete(d.queue[0], noteTooManyPending)
	}
	p := d.alloc()
	p.ex.ReqFirst, p.ex.ReqLast, p.ex.ReqBytes = m.first, m.last, m.wire
	p.ex.Note, d.note = d.note, ""
	keep := m.payload
	if m.payload[0] == comStmtSendLongData {
		keep = keep[:min(len(keep), 7)] // statement and param ids; the data is not needed
	}
	p.raw = append(p.raw[:0], keep...)
	p.truncated = len(m.payload) < m.length && m.payload[0] != comStmtSendLongData
	d.queue = append(d.queue, p)
	d.promote()
}

// serverPacket applies a server packet to the oldest pending command.
func (d *ConnDecoder) serverPacket(p *packet) {
	if d.swallowEnd {
		d.swallowEnd = false
		if !d.srvCont && isEndMarker(p.payload, p.length) {
			return // the trailing EOF of a prepare response already emitted
		}
	}
	h := d.head()
	if h != nil {
		if h.ex.RespFirst == 0 {
			h.ex.RespFirst = p.first
		}
		h.ex.RespLast = p.last
		h.ex.RespBytes += p.wire
	}
	if d.srvCont {
		d.srvCont = p.length == maxPacket
		return
	}
	d.srvCont = p.length == maxPacket
	if h == nil || len(p.payload) == 0 {
		return // unsolicited (e.g. a server shutdown notice) or malformed
	}
	d.respond(h, p)
}

func (d *ConnDecoder) head() *pending {
	if len(d.queue) == 0 {
		return nil
	}
	return d.queue[0]
}

// promote parses the head command if it is new, emitting commands that get
// no response at once.
func (d *ConnDecoder) promote() {
	for len(d.queue) > 0 && !d.queue[0].started {
		h := d.queue[0]
		d.startCommand(h)
		if !h.ex.NoResponse {
			return
		}
		d.emit(h)
		d.afterNoResponse(h)
		d.pop()
	}
}

// finish emits the head exchange and moves on to the next command.
func (d *ConnDecoder) finish(h *pending) {
	d.emit(h)
	d.pop()
	d.promote()
}

func (d *ConnDecoder) finishIncomplete(h *pending, note string) {
	h.ex.Incomplete = true
	if h.ex.Note == "" {
		h.ex.Note = note
	}
	if !h.started {
		d.startCommand(h)
	}
	d.emit(h)
	if h.ex.NoResponse {
		d.afterNoResponse(h)
	}
	d.pop()
}

// flushPending emits every pending command as Incomplete.
func (d *ConnDecoder) flushPending(note string) {
	for len(d.queue) > 0 {
		d.finishIncomplete(d.queue[0], note)
	}
}

func (d *ConnDecoder) emit(h *pending) {
	ex := &h.ex
	if ex.ResultSets == 0 && ex.Rows == 0 { // no rows sent (COM_STMT_FETCH has rows but no result set header)
		ex.Rows = int64(ex.AffectedRows)
	}
	if d.h != nil {
		d.h.OnExchange(ex, &d.info)
	}
}

// Awaiting reports whether a command the client sent has not been answered
// in full yet: the server is working on it, or still sending its answer.
func (d *ConnDecoder) Awaiting() bool { return len(d.queue) > 0 }

func (d *ConnDecoder) pop() {
	h := d.queue[0]
	n := copy(d.queue, d.queue[1:])
	d.queue[n] = nil
	d.queue = d.queue[:n]
	d.free = append(d.free, h)
}

func (d *ConnDecoder) alloc() *pending {
	var p *pending
	if n := len(d.free); n > 0 {
		p = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		p = &pending{}
	}
	p.resetFor()
	return p
}
