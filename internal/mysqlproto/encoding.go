package mysqlproto

// Comma-ok readers over a payload: each returns the value, the position after
// it and whether the bytes were there. None reads past len(b).

func readU8(b []byte, pos int) (byte, int, bool) {
	if pos < 0 || pos >= len(b) {
		return 0, pos, false
	}
	return b[pos], pos + 1, true
}

func readU16(b []byte, pos int) (uint16, int, bool) {
	if pos < 0 || pos+2 > len(b) {
		return 0, pos, false
	}
	return uint16(b[pos]) | uint16(b[pos+1])<<8, pos + 2, true
}

func readU24(b []byte, pos int) (uint32, int, bool) {
	if pos < 0 || pos+3 > len(b) {
		return 0, pos, false
	}
	return uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16, pos + 3, true
}

func readU32(b []byte, pos int) (uint32, int, bool) {
	if pos < 0 || pos+4 > len(b) {
		return 0, pos, false
	}
	return uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16 | uint32(b[pos+3])<<24, pos + 4, true
}

func readU64(b []byte, pos int) (uint64, int, bool) {
	lo, p, ok := readU32(b, pos)
	if !ok {
		return 0, pos, false
	}
	hi, p, ok := readU32(b, p)
	if !ok {
		return 0, pos, false
	}
	return uint64(lo) | uint64(hi)<<32, p, true
}

// readLenEnc reads a length-encoded integer. 0xFB (NULL) and 0xFF are not
// integers and fail.
func readLenEnc(b []byte, pos int) (uint64, int, bool) {
	c, p, ok := readU8(b, pos)
	if !ok {
		return 0, pos, false
	}
	switch {
	case c < 0xfb:
		return uint64(c), p, true
	case c == 0xfc:
		v, p, ok := readU16(b, p)
		return uint64(v), p, ok
	case c == 0xfd:
		v, p, ok := readU24(b, p)
		return uint64(v), p, ok
	case c == 0xfe:
		return readU64(b, p)
	}
	return 0, pos, false
}

// readLenEncBytes reads a length-encoded string; the result aliases b.
func readLenEncBytes(b []byte, pos int) ([]byte, int, bool) {
	n, p, ok := readLenEnc(b, pos)
	if !ok || n > uint64(len(b)-p) {
		return nil, pos, false
	}
	return b[p : p+int(n)], p + int(n), true
}

// readNul reads a NUL-terminated string; without a NUL it fails.
func readNul(b []byte, pos int) ([]byte, int, bool) {
	if pos < 0 || pos > len(b) {
		return nil, pos, false
	}
	for i := pos; i < len(b); i++ {
		if b[i] == 0 {
			return b[pos:i], i + 1, true
		}
	}
	return nil, pos, false
}

// readNulOrEnd reads a NUL-terminated string, or the rest when there is no
// NUL (some clients omit the last terminator).
func readNulOrEnd(b []byte, pos int) ([]byte, int) {
	if s, p, ok := readNul(b, pos); ok {
		return s, p
	}
	if pos < 0 || pos > len(b) {
		return nil, len(b)
	}
	return b[pos:], len(b)
}

func le24(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }
