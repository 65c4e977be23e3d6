package mysqlproto

// okPacket is an OK packet (header 0x00, or 0xFE when it ends a result set
// under CLIENT_DEPRECATE_EOF).
type okPacket struct {
	affected, lastInsertID uint64
	status, warnings       uint16
	schema                 []byte // new default schema from session tracking; nil when unchanged
}

// parseOK decodes an OK packet; sessionTrack says whether the
// CLIENT_SESSION_TRACK capability was negotiated.
func parseOK(b []byte, sessionTrack bool) (okPacket, bool) {
	var ok okPacket
	var good bool
	pos := 1
	if ok.affected, pos, good = readLenEnc(b, pos); !good {
		return ok, false
	}
	if ok.lastInsertID, pos, good = readLenEnc(b, pos); !good {
		return ok, false
	}
	if ok.status, pos, good = readU16(b, pos); !good {
		return ok, false
	}
	if ok.warnings, pos, good = readU16(b, pos); !good {
		return ok, true // pre-4.1 servers stop here; the status is what matters
	}
	if sessionTrack && ok.status&statusStateChanged != 0 {
		ok.schema = parseSessionSchema(b, pos)
	}
	return ok, true
}

// parseSessionSchema finds a SESSION_TRACK_SCHEMA entry in the session state
// info that follows the human-readable info string of an OK packet.
func parseSessionSchema(b []byte, pos int) []byte {
	_, pos, ok := readLenEncBytes(b, pos) // info
	if !ok {
		return nil
	}
	state, _, ok := readLenEncBytes(b, pos)
	if !ok {
		return nil
	}
	for p := 0; p < len(state); {
		typ, np, ok := readU8(state, p)
		if !ok {
			return nil
		}
		data, np, ok := readLenEncBytes(state, np)
		if !ok {
			return nil
		}
		if typ == 1 { // SESSION_TRACK_SCHEMA: data is itself a lenenc string
			name, _, ok := readLenEncBytes(data, 0)
			if ok {
				return name
			}
		}
		p = np
	}
	return nil
}

// errPacket is an ERR packet; state and msg alias the payload.
type errPacket struct {
	code       uint16
	state, msg []byte
}

// progressCode is the error code MariaDB uses for progress reports, which
// are not errors and do not end a response.
const progressCode = 0xffff

func parseErr(b []byte) (errPacket, bool) {
	var e errPacket
	code, pos, ok := readU16(b, 1)
	if !ok {
		return e, false
	}
	e.code = code
	if pos < len(b) && b[pos] == '#' && pos+6 <= len(b) {
		e.state = b[pos+1 : pos+6]
		pos += 6
	}
	e.msg = b[pos:]
	return e, true
}

// toInfo copies an ERR packet into strings the handler may keep. Errors
// are rare, so the allocation is off the steady-state path.
func (e errPacket) toInfo() *ErrInfo {
	return &ErrInfo{Code: e.code, State: string(e.state), Msg: string(e.msg)}
}

// parseEOF decodes a classic EOF packet: warnings and status flags.
func parseEOF(b []byte) (warnings, status uint16, ok bool) {
	w, pos, ok1 := readU16(b, 1)
	s, _, ok2 := readU16(b, pos)
	return w, s, ok1 && ok2
}

// isEndMarker reports whether a packet in a row stream ends the result set:
// an EOF (short 0xFE) or, under CLIENT_DEPRECATE_EOF, an OK with header 0xFE.
// A row that begins with 0xFE is a length-encoded string of at least 2^24
// bytes, so its first packet is always a full 0xffffff one.
func isEndMarker(b []byte, length int) bool {
	return len(b) > 0 && b[0] == 0xfe && length < maxPacket
}

// isErr reports whether a packet is an ERR packet that ends a response
// (MariaDB progress reports share the 0xFF header but do not).
func isErr(b []byte) bool {
	if len(b) == 0 || b[0] != 0xff {
		return false
	}
	code, _, ok := readU16(b, 1)
	return !ok || code != progressCode
}

func isProgress(b []byte) bool {
	code, _, ok := readU16(b, 1)
	return len(b) > 0 && b[0] == 0xff && ok && code == progressCode
}
