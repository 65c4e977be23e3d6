package mysqlproto

// respState is where a pending command's response stands.
type respState uint8

const (
	rsFirst        respState = iota // first packet of a result: OK, ERR, EOF, LOCAL INFILE or a column count
	rsColumns                       // column definitions still to come (pending.left)
	rsAfterColumns                  // the EOF after column definitions, or the first row
	rsRows                          // rows until the end marker
	rsPrepareDefs                   // param and column definitions of a prepare response
	rsInfileData                    // the client is sending the file
	rsAuth                          // COM_CHANGE_USER authentication exchange
	rsFieldList                     // COM_FIELD_LIST column definitions
)

// pending is one client command waiting for (or receiving) its response.
type pending struct {
	ex        Exchange
	raw       []byte // copy of the request payload; SQL may alias it
	truncated bool   // raw is a prefix of a larger request
	started   bool   // the command was parsed and its response is being tracked
	st        respState
	left      uint64 // definitions left in the current group
	rows      int64
	cursor    bool // COM_STMT_EXECUTE asked for a read-only cursor

	// prepare response
	prepID     uint32
	prepGroups [2]uint64 // param and column definition counts
	prepGroup  int       // group being read; 2 when done

	params [][]byte
	pbuf   []byte
	poff   []int
}

// resetFor clears a recycled pending, keeping its buffers.
func (p *pending) resetFor() {
	params, pbuf, poff, raw := p.params[:0], p.pbuf[:0], p.poff[:0], p.raw[:0]
	*p = pending{raw: raw, params: params, pbuf: pbuf, poff: poff}
}

// respond advances the head command's response by one server packet.
func (d *ConnDecoder) respond(h *pending, p *packet) {
	b := p.payload
	if isProgress(b) {
		return
	}
	switch h.st {
	case rsFirst:
		d.resultFirst(h, p)
	case rsColumns:
		if isErr(b) {
			d.finishErr(h, b)
			return
		}
		if h.left--; h.left == 0 {
			h.st = rsAfterColumns
		}
	case rsAfterColumns:
		d.afterColumns(h, p)
	case rsRows:
		d.row(h, p)
	case rsPrepareDefs:
		d.prepareDef(h, p)
	case rsInfileData:
		// The server does not speak while the file is sent; an OK/ERR here
		// means the client gave up: take it as the result.
		d.resultFirst(h, p)
	case rsAuth:
		d.changeUserAuth(h, b)
	case rsFieldList:
		if isErr(b) {
			d.finishErr(h, b)
		} else if isEndMarker(b, p.length) {
			d.finish(h)
		}
	}
}

// resultFirst handles the first packet of a result.
func (d *ConnDecoder) resultFirst(h *pending, p *packet) {
	b := p.payload
	switch {
	case h.ex.Cmd == comStatistics: // a bare status string
		if isErr(b) {
			d.finishErr(h, b)
			return
		}
		d.finish(h)
	case isErr(b):
		d.finishErr(h, b)
	case h.ex.Cmd == comChangeUser:
		d.changeUserAuth(h, b)
	case b[0] == 0x00 && h.ex.Cmd == comStmtPrepare:
		d.prepareOK(h, b)
	case b[0] == 0x00 && (h.ex.Cmd == comBinlogDump || h.ex.Cmd == comBinlogDumpGTID):
		d.startStream(h)
	case b[0] == 0x00:
		d.resultOK(h, b)
	case b[0] == 0xfe && p.length < 9:
		w, status, _ := parseEOF(b)
		h.ex.Warnings, h.ex.Status = w, status
		h.ex.Results++
		d.endResult(h, status)
	case b[0] == 0xfb:
		h.st = rsInfileData
		if h.ex.Note == "" {
			h.ex.Note = noteLocalInfile
		}
	case h.ex.Cmd == comFieldList:
		h.st = rsFieldList
	default:
		d.columnCount(h, b)
	}
}

func (d *ConnDecoder) resultOK(h *pending, b []byte) {
	ok, good := parseOK(b, d.sessionTrack())
	if !good {
		d.malformed(h)
		return
	}
	d.applyOK(h, &ok)
	d.endResult(h, ok.status)
}

func (d *ConnDecoder) applyOK(h *pending, ok *okPacket) {
	ex := &h.ex
	ex.Results++
	ex.AffectedRows += ok.affected
	if ok.lastInsertID != 0 {
		ex.LastInsertID = ok.lastInsertID
	}
	ex.Warnings, ex.Status = ok.warnings, ok.status
	if ok.schema != nil {
		d.setDB(ok.schema)
	}
	if ex.Cmd == comInitDB {
		d.setDB(ex.SQL)
	}
	if ex.Cmd == comResetConnection {
		d.dropAllStmts()
	}
}

// columnCount starts a result set. With MariaDB's metadata cache, a byte
// after the count says whether column definitions follow at all.
func (d *ConnDecoder) columnCount(h *pending, b []byte) {
	n, pos, ok := readLenEnc(b, 0)
	if !ok || n == 0 {
		d.malformed(h)
		return
	}
	h.ex.ResultSets++
	h.ex.Results++
	if pos < len(b) && b[pos] == 0 {
		h.st = rsAfterColumns
		return
	}
	h.left = n
	h.st = rsColumns
}

// afterColumns handles the packet after the column definitions: an EOF in
// the classic protocol, the first row or the end marker under
// DEPRECATE_EOF. The two kinds of 0xFE packet differ in size: an EOF is 5
// bytes, an OK at least 7, which settles a mid-stream start.
func (d *ConnDecoder) afterColumns(h *pending, p *packet) {
	b := p.payload
	switch {
	case isErr(b):
		d.finishErr(h, b)
	case isEndMarker(b, p.length) && d.columnsEOF(p.length):
		_, status, _ := parseEOF(b)
		if status&statusCursorExists != 0 {
			h.ex.Status = status
			d.finish(h) // rows come with COM_STMT_FETCH
			return
		}
		h.st = rsRows
	case isEndMarker(b, p.length):
		d.learnEOF(eofDeprecated)
		d.endRows(h, p)
	default:
		d.learnEOF(eofDeprecated)
		h.rows++
		h.st = rsRows
	}
}

// columnsEOF reports whether a short 0xFE packet after column definitions
// is the classic EOF (rows follow) rather than the final marker.
func (d *ConnDecoder) columnsEOF(length int) bool {
	switch d.eof {
	case eofClassic:
		return true
	case eofDeprecated:
		return false
	}
	if length < 7 {
		d.learnEOF(eofClassic)
		return true
	}
	d.learnEOF(eofDeprecated)
	return false
}

func (d *ConnDecoder) learnEOF(m eofMode) {
	if d.eof == eofUnknown {
		d.eof = m
	}
}

// skipRows counts the rows at the start of data (a server chunk starting
// at a packet boundary) while the head command is in its rows, without
// delivering them one by one: a row needs only its header and first byte.
// It stops before anything the decoder must see (the end marker or an ERR
// or progress report: first byte 0xFE or 0xFF; an empty or 16 MiB packet;
// a packet the chunk does not hold whole) and returns the bytes it took,
// accounted to the response as row() and serverPacket() would.
func (d *ConnDecoder) skipRows(data []byte, tsFirst, tsLast int64) int {
	if d.phase != phaseCommand || d.srvCont || d.swallowEnd || len(d.queue) == 0 {
		return 0
	}
	h := d.queue[0]
	if h.st != rsRows {
		return 0
	}
	if len(data) >= touchAhead {
		d.touched ^= touchLines(data)
	}
	n, rows := 0, int64(0)
	for len(data)-n >= 5 {
		length := le24(data[n:])
		if length == 0 || length >= maxPacket || n+4+length > len(data) {
			break
		}
		if first := data[n+4]; first == 0xfe || first == 0xff {
			break
		}
		n += 4 + length
		rows++
	}
	if rows > 0 {
		if h.ex.RespFirst == 0 {
			h.ex.RespFirst = tsFirst
		}
		h.ex.RespLast = tsLast
		h.ex.RespBytes += int64(n)
		h.rows += rows
	}
	return n
}

func (d *ConnDecoder) row(h *pending, p *packet) {
	b := p.payload
	switch {
	case isEndMarker(b, p.length):
		d.endRows(h, p)
	case isErr(b):
		d.finishErr(h, b)
	default:
		h.rows++
	}
}

// endRows handles the marker that ends a result set's rows.
func (d *ConnDecoder) endRows(h *pending, p *packet) {
	h.ex.Rows += h.rows
	h.rows = 0
	if d.eof == eofDeprecated || (d.eof == eofUnknown && p.length >= 7) {
		ok, good := parseOK(p.payload, d.sessionTrack())
		if !good {
			d.malformed(h)
			return
		}
		h.ex.Warnings, h.ex.Status = ok.warnings, ok.status
		if ok.schema != nil {
			d.setDB(ok.schema)
		}
		d.endResult(h, ok.status)
		return
	}
	w, status, _ := parseEOF(p.payload)
	h.ex.Warnings, h.ex.Status = w, status
	d.endResult(h, status)
}

// endResult ends one result; with SERVER_MORE_RESULTS_EXISTS another follows.
func (d *ConnDecoder) endResult(h *pending, status uint16) {
	if status&statusMoreResults != 0 {
		h.st = rsFirst
		return
	}
	d.finish(h)
}

func (d *ConnDecoder) finishErr(h *pending, b []byte) {
	if e, ok := parseErr(b); ok {
		h.ex.Err = e.toInfo()
	}
	h.ex.Rows += h.rows
	h.rows = 0
	h.ex.Results++
	d.finish(h)
}

func (d *ConnDecoder) malformed(h *pending) {
	h.ex.Incomplete = true
	if h.ex.Note == "" {
		h.ex.Note = noteMalformed
	}
	d.finish(h)
}

// prepareOK reads COM_STMT_PREPARE's OK: statement id, column and param
// counts; the definitions follow.
func (d *ConnDecoder) prepareOK(h *pending, b []byte) {
	id, pos, ok1 := readU32(b, 1)
	cols, pos, ok2 := readU16(b, pos)
	params, pos, ok3 := readU16(b, pos)
	if !ok1 || !ok2 || !ok3 {
		d.malformed(h)
		return
	}
	if w, _, ok := readU16(b, pos+1); ok {
		h.ex.Warnings = w
	}
	h.ex.StmtID, h.prepID = id, id
	h.ex.Results++
	d.addStmt(id, h.ex.SQL, int(params))
	h.prepGroups = [2]uint64{uint64(params), uint64(cols)}
	h.prepGroup = -1
	h.st = rsPrepareDefs
	d.nextPrepareGroup(h)
}

// nextPrepareGroup moves to the next non-empty definition group, finishing
// the exchange when none is left.
func (d *ConnDecoder) nextPrepareGroup(h *pending) {
	for h.prepGroup++; h.prepGroup < 2; h.prepGroup++ {
		if h.left = h.prepGroups[h.prepGroup]; h.left > 0 {
			return
		}
	}
	d.finish(h)
}

// prepareDef reads one packet of the definition groups. Each group ends
// with an EOF in the classic protocol and with nothing under DEPRECATE_EOF.
func (d *ConnDecoder) prepareDef(h *pending, p *packet) {
	b := p.payload
	if isErr(b) {
		d.finishErr(h, b)
		return
	}
	if h.left == 0 { // right after a group: an EOF or the next group's first definition
		if isEndMarker(b, p.length) {
			d.learnEOF(eofClassic)
			d.nextPrepareGroup(h)
			return
		}
		d.learnEOF(eofDeprecated)
		d.nextPrepareGroup(h)
		if h.prepGroup >= 2 {
			return // nothing left: the packet was not ours (cannot happen in a sane stream)
		}
	}
	if h.left--; h.left > 0 {
		return
	}
	d.groupDone(h)
}

// groupDone decides, at the end of a definition group, whether to wait for
// an EOF.
func (d *ConnDecoder) groupDone(h *pending) {
	last := h.prepGroup == 1 || h.prepGroups[1] == 0
	switch {
	case d.eof == eofDeprecated:
		d.nextPrepareGroup(h)
	case d.eof == eofUnknown && last:
		// Mid-stream we cannot tell whether an EOF follows: end here and
		// let the next server packet be swallowed if it is one.
		d.finish(h)
		d.swallowEnd = true
	}
}

// changeUserAuth follows COM_CHANGE_USER's authentication: auth switch and
// more-data packets until the final OK or ERR.
func (d *ConnDecoder) changeUserAuth(h *pending, b []byte) {
	switch {
	case isErr(b):
		d.finishErr(h, b)
	case b[0] == 0x00:
		h.ex.Results++
		d.info.User = string(h.changeUser())
		d.setDB(h.changeDB())
		d.dropAllStmts()
		if ok, good := parseOK(b, d.sessionTrack()); good {
			h.ex.Status, h.ex.Warnings = ok.status, ok.warnings
		}
		d.finish(h)
	default:
		if b[0] == 0xfe {
			if plugin, _, ok := readNul(b, 1); ok {
				d.info.AuthPlugin = string(plugin)
			}
		}
		h.st = rsAuth
	}
}

func (d *ConnDecoder) sessionTrack() bool {
	return d.info.SeenHandshake && d.info.ClientCaps&d.info.ServerCaps&capSessionTrack != 0
}

// setDB updates the default schema, allocating only when it changed.
func (d *ConnDecoder) setDB(db []byte) {
	if string(db) != d.info.DB {
		d.info.DB = string(db)
	}
}

// touchAhead is the chunk size from which skipRows first reads one byte of
// every cache line. Each row header's place depends on the header before
// it, so walking memory the kernel has just written (on another core)
// waits for one cache miss at a time; loads at fixed strides do not depend
// on each other, so the processor overlaps their misses, and the walk then
// finds the lines in its own cache.
const touchAhead = 512

// touchLines reads one byte per 64-byte line of b and returns their XOR
// (kept by the caller so that the loads are not optimised away).
func touchLines(b []byte) byte {
	var x byte
	for i := 0; i < len(b); i += 64 {
		x ^= b[i]
	}
	return x
}

// startStream: the server answered a binlog dump with its first event. The
// exchange is emitted now, marked as a stream, and the connection's server
// packets are the stream's from here on (streamPacket).
func (d *ConnDecoder) startStream(h *pending) {
	h.ex.Stream = true
	d.finish(h)
	d.flushPending(noteCutShort) // nothing follows a dump on the client's side
	d.phase = phaseStream
}

// streamPacket follows a binlog stream: every packet is an event (0x00)
// until an EOF (a non-blocking dump at the binlog's end) or an ERR ends
// it, after which the connection takes commands again.
func (d *ConnDecoder) streamPacket(p *packet) {
	cont := d.srvCont
	d.srvCont = p.length == maxPacket
	if cont || len(p.payload) == 0 {
		return // the rest of an event of 16 MiB or more
	}
	if isErr(p.payload) || isEndMarker(p.payload, p.length) {
		d.phase = phaseCommand
	}
}
