package mysqlproto

// LooksLikeGreeting reports whether a server's TCP payload starts with a
// MySQL/MariaDB Handshake v10 packet: sequence 0, protocol 10, a printable
// version string and a plausible length.
func LooksLikeGreeting(data []byte) bool {
	if len(data) < 5 || data[3] != 0 {
		return false
	}
	n := le24(data)
	if n < 32 || n > 1024 || data[4] != 10 {
		return false
	}
	body := data[4:min(len(data), 4+n)]
	v, _, ok := readNul(body, 1)
	if !ok || len(v) == 0 || v[0] < '0' || v[0] > '9' {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// LooksLikeCommand reports whether a client's TCP payload starts with a
// well-formed command packet: sequence 0, a command byte a client sends
// and a length that command can have.
func LooksLikeCommand(data []byte) bool {
	if len(data) < 5 || data[3] != 0 {
		return false
	}
	return plausibleCommand(le24(data), data[4:])
}

// plausibleCommand checks a command's length against what its command
// byte allows; payload may hold only the start of the command.
func plausibleCommand(n int, payload []byte) bool {
	if n == 0 || len(payload) == 0 {
		return false
	}
	switch payload[0] {
	case comQuit, comStatistics, comPing, comResetConnection:
		return n == 1
	case comStmtClose, comStmtReset, comProcessKill:
		return n == 5
	case comStmtFetch:
		return n == 9
	case comSetOption:
		return n == 3
	case comStmtExecute:
		return n >= 10
	case comStmtSendLongData:
		return n >= 7
	case comInitDB, comFieldList, comChangeUser:
		return n >= 2 && n < 1<<16
	case comQuery, comStmtPrepare:
		return n >= 2 && len(payload) >= 2 && sqlStart(payload[1])
	}
	return false
}

// sqlStart reports whether c can begin a statement's text: a letter,
// whitespace, '(' or the start of a comment.
func sqlStart(c byte) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		return true
	case c == ' ', c == '\t', c == '\n', c == '\r', c == '(', c == '/', c == '-', c == '#', c == '{':
		return true
	}
	return false
}

// looksLikeCompressedCommand is LooksLikeCommand for the compressed
// protocol: a 7-byte header around a raw command, or around zlib data.
func looksLikeCompressedCommand(data []byte) bool {
	if len(data) < 8 || data[3] != 0 {
		return false
	}
	clen, ulen := le24(data), le24(data[4:])
	if clen == 0 {
		return false
	}
	if ulen == 0 {
		return LooksLikeCommand(data[7:])
	}
	// zlib header: CMF 0x78 and a check value that makes CMF*256+FLG a multiple of 31.
	return len(data) >= 9 && data[7] == 0x78 && (uint16(data[7])<<8|uint16(data[8]))%31 == 0 && ulen >= 5
}
