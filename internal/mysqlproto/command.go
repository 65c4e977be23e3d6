package mysqlproto

// stmtInfo is what the decoder remembers of a prepared statement.
type stmtInfo struct {
	sql      []byte
	nParams  int
	types    []byte // 2 bytes per param, from the last execute that bound them
	longData []bool // params sent with COM_STMT_SEND_LONG_DATA since the last execute
	memo     any    // the handler's, through Exchange.Memo; emptied with a new text
}

// startCommand parses the head command from its raw payload and sets up
// response tracking.
func (d *ConnDecoder) startCommand(h *pending) {
	h.started = true
	b := h.raw
	ex := &h.ex
	ex.Cmd = b[0]
	ex.CmdName = CommandName(b[0])
	ex.NoResponse = noResponse(b[0])
	h.st = rsFirst
	if h.truncated && ex.Note == "" {
		ex.Note = noteTruncated
	}
	switch ex.Cmd {
	case comQuery:
		ex.SQL = d.querySQL(b)
	case comStmtPrepare, comInitDB:
		ex.SQL = b[1:]
	case comFieldList:
		ex.SQL, _ = readNulOrEnd(b, 1)
	case comStmtExecute:
		d.startExecute(h)
	case comStmtFetch:
		d.stmtRef(h)
		h.st = rsRows
	case comStmtClose, comStmtReset, comStmtBulkExecute:
		d.stmtRef(h)
		if si := d.stmts[ex.StmtID]; si != nil && ex.Cmd == comStmtReset {
			clear(si.longData)
		}
	case comStmtSendLongData:
		d.longData(h)
	case comQuit:
		d.phase = phaseOpaque
	}
}

// querySQL returns COM_QUERY's text. With MySQL 8's query attributes the
// text follows a parameter block.
func (d *ConnDecoder) querySQL(b []byte) []byte {
	if !d.queryAttributes() {
		return b[1:]
	}
	n, pos, ok := readLenEnc(b, 1)
	if !ok {
		return b[1:]
	}
	if _, pos, ok = readLenEnc(b, pos); !ok { // parameter set count, always 1
		return b[1:]
	}
	if n > maxParams {
		return b[1:]
	}
	if n > 0 {
		var note string
		if pos, note = d.decodeValues(&d.attrs, b, pos, int(n), nil, true); note != "" {
			return b[1:]
		}
	}
	return b[pos:]
}

func (d *ConnDecoder) queryAttributes() bool {
	return d.info.SeenHandshake && d.info.ClientCaps&d.info.ServerCaps&capQueryAttributes != 0
}

// stmtRef reads the statement id that follows the command byte and points
// SQL at the prepared text.
func (d *ConnDecoder) stmtRef(h *pending) *stmtInfo {
	id, _, ok := readU32(h.raw, 1)
	if !ok {
		return nil
	}
	if id == 0xffffffff { // MariaDB: the statement prepared just before
		id = d.lastStmt
	}
	h.ex.StmtID = id
	si := d.stmts[id]
	if si != nil {
		h.ex.SQL, h.ex.Memo = si.sql, &si.memo
	}
	return si
}

func (d *ConnDecoder) longData(h *pending) {
	si := d.stmtRef(h)
	param, _, ok := readU16(h.raw, 5)
	if si != nil && ok && int(param) < len(si.longData) {
		si.longData[param] = true
	}
}

// afterNoResponse applies what a command without response changes, once it
// has been emitted (its SQL may alias the statement's text until then).
func (d *ConnDecoder) afterNoResponse(h *pending) {
	if h.ex.Cmd == comStmtClose {
		d.dropStmt(h.ex.StmtID)
	}
}

// addStmt remembers a prepared statement, reusing freed entries.
func (d *ConnDecoder) addStmt(id uint32, sql []byte, nParams int) {
	d.lastStmt = id
	si := d.stmts[id]
	if si == nil {
		if len(d.stmts) >= maxStatements {
			return
		}
		si = d.newStmt()
		d.stmts[id] = si
	}
	si.sql = append(si.sql[:0], sql...)
	si.memo = nil
	si.nParams = nParams
	si.types = si.types[:0]
	si.longData = si.longData[:0]
	for range nParams {
		si.longData = append(si.longData, false)
	}
}

func (d *ConnDecoder) newStmt() *stmtInfo {
	if n := len(d.freeStmts); n > 0 {
		si := d.freeStmts[n-1]
		d.freeStmts = d.freeStmts[:n-1]
		return si
	}
	return &stmtInfo{}
}

func (d *ConnDecoder) dropStmt(id uint32) {
	if si := d.stmts[id]; si != nil {
		delete(d.stmts, id)
		d.freeStmts = append(d.freeStmts, si)
	}
}

func (d *ConnDecoder) dropAllStmts() {
	for id := range d.stmts {
		d.dropStmt(id)
	}
}

// changeUser and changeDB read COM_CHANGE_USER's request: user NUL, auth
// data (1-byte length with SECURE_CONNECTION, else NUL-terminated), schema NUL.
func (h *pending) changeUser() []byte {
	u, _ := readNulOrEnd(h.raw, 1)
	return u
}

func (h *pending) changeDB() []byte {
	_, pos, ok := readNul(h.raw, 1)
	if !ok {
		return nil
	}
	n, pos, ok := readU8(h.raw, pos)
	if !ok || pos+int(n) > len(h.raw) {
		return nil
	}
	db, _ := readNulOrEnd(h.raw, pos+int(n))
	return db
}
