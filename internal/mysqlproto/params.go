package mysqlproto

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Binary protocol field types.
const (
	typeDecimal    = 0x00
	typeTiny       = 0x01
	typeShort      = 0x02
	typeLong       = 0x03
	typeFloat      = 0x04
	typeDouble     = 0x05
	typeNull       = 0x06
	typeTimestamp  = 0x07
	typeLongLong   = 0x08
	typeInt24      = 0x09
	typeDate       = 0x0a
	typeTime       = 0x0b
	typeDateTime   = 0x0c
	typeYear       = 0x0d
	typeNewDate    = 0x0e
	typeVarchar    = 0x0f
	typeBit        = 0x10
	typeTimestamp2 = 0x11
	typeDateTime2  = 0x12
	typeTime2      = 0x13
	typeJSON       = 0xf5
	typeNewDecimal = 0xf6
	typeEnum       = 0xf7
	typeSet        = 0xf8
	typeTinyBlob   = 0xf9
	typeMediumBlob = 0xfa
	typeLongBlob   = 0xfb
	typeBlob       = 0xfc
	typeVarString  = 0xfd
	typeString     = 0xfe
	typeGeometry   = 0xff
)

const (
	execParamCountAvailable = 0x08 // MySQL 8: a parameter count precedes the null bitmap
	maxParams               = 65535
	longDataLiteral         = "'<long data>'"
)

// startExecute reads COM_STMT_EXECUTE: statement id, flags, iteration count
// and, when the statement has params, their values rendered as SQL literals.
func (d *ConnDecoder) startExecute(h *pending) {
	si := d.stmtRef(h)
	b := h.raw
	flags, _, ok := readU8(b, 5)
	if !ok {
		h.ex.Incomplete = true
		h.ex.Note = noteParamsBad
		return
	}
	h.cursor = flags&0x01 != 0
	if si == nil {
		if h.ex.Note == "" {
			h.ex.Note = noteUnknownStmt
		}
		return
	}
	n, pos := si.nParams, 10
	if d.queryAttributes() && flags&execParamCountAvailable != 0 {
		c, p, ok := readLenEnc(b, pos)
		if !ok || c > maxParams {
			h.ex.Note = noteParamsBad
			return
		}
		n, pos = int(c), p
	}
	h.ex.Params = h.params[:0]
	if n > 0 {
		if _, note := d.decodeValues(h, b, pos, n, si, d.queryAttributes()); note != "" {
			h.ex.Params = nil
			if h.ex.Note == "" {
				h.ex.Note = note
			}
		}
	}
	clear(si.longData) // the server forgets long data after an execute
}

// decodeValues reads a parameter block: null bitmap, new-params-bound flag,
// types (each followed by a name when named) and values. The literals go
// to h.params. si supplies the types remembered from an earlier execute
// and records newly bound ones; it may be nil (query attributes).
func (d *ConnDecoder) decodeValues(h *pending, b []byte, pos, n int, si *stmtInfo, named bool) (int, string) {
	nb := (n + 7) / 8
	if pos+nb+1 > len(b) {
		return pos, noteParamsBad
	}
	bitmap := b[pos : pos+nb]
	pos += nb
	bound := b[pos]
	pos++
	var types []byte
	switch {
	case bound == 1:
		var ok bool
		if types, pos, ok = readTypes(b, pos, n, named); !ok {
			return pos, noteParamsBad
		}
		if si != nil && !named {
			si.types = append(si.types[:0], types...)
		}
	case si != nil && len(si.types) >= 2*n:
		types = si.types
	default:
		return pos, noteParamTypes
	}
	if d.opts.SkipParams {
		h.ex.Params = nil
		return pos, ""
	}
	if named { // names interleave with types: collect types alone
		types = compactTypes(types, n)
	}
	return d.renderParams(h, b, pos, n, bitmap, types, si)
}

// readTypes returns the type block (2 bytes per param; with names, each
// pair followed by a length-encoded name).
func readTypes(b []byte, pos, n int, named bool) ([]byte, int, bool) {
	start := pos
	if !named {
		if pos+2*n > len(b) {
			return nil, pos, false
		}
		return b[pos : pos+2*n], pos + 2*n, true
	}
	for range n {
		if pos+2 > len(b) {
			return nil, start, false
		}
		var ok bool
		if _, pos, ok = readLenEncBytes(b, pos+2); !ok {
			return nil, start, false
		}
	}
	return b[start:pos], pos, true
}

// compactTypes strips the names from a named type block (MySQL 8 query
// attributes only, so its allocation is off the common path).
func compactTypes(block []byte, n int) []byte {
	out := make([]byte, 0, 2*n)
	for pos := 0; len(out) < 2*n && pos+2 <= len(block); {
		out = append(out, block[pos], block[pos+1])
		_, p, ok := readLenEncBytes(block, pos+2)
		if !ok {
			break
		}
		pos = p
	}
	return out
}

// renderParams renders each value into h.pbuf and points h.params at the
// pieces once the buffer has stopped growing.
func (d *ConnDecoder) renderParams(h *pending, b []byte, pos, n int, bitmap, types []byte, si *stmtInfo) (int, string) {
	h.pbuf, h.poff = h.pbuf[:0], h.poff[:0]
	for i := range n {
		h.poff = append(h.poff, len(h.pbuf))
		switch {
		case bitmap[i/8]&(1<<(i%8)) != 0:
			h.pbuf = append(h.pbuf, "NULL"...)
		case si != nil && i < len(si.longData) && si.longData[i]:
			h.pbuf = append(h.pbuf, longDataLiteral...)
		default:
			var ok bool
			if h.pbuf, pos, ok = renderValue(h.pbuf, types[2*i], types[2*i+1], b, pos); !ok {
				return pos, noteParamsBad
			}
		}
	}
	h.poff = append(h.poff, len(h.pbuf))
	h.params = h.params[:0]
	for i := range n {
		h.params = append(h.params, h.pbuf[h.poff[i]:h.poff[i+1]:h.poff[i+1]])
	}
	h.ex.Params = h.params
	return pos, ""
}

// renderValue appends the SQL literal of the binary value of type typ at
// b[pos:] (flags bit 0x80: unsigned).
func renderValue(dst []byte, typ, flags byte, b []byte, pos int) ([]byte, int, bool) {
	unsigned := flags&0x80 != 0
	switch typ {
	case typeNull:
		return append(dst, "NULL"...), pos, true
	case typeTiny:
		v, p, ok := readU8(b, pos)
		return appendInt(dst, uint64(v), int64(int8(v)), unsigned), p, ok
	case typeShort, typeYear:
		v, p, ok := readU16(b, pos)
		return appendInt(dst, uint64(v), int64(int16(v)), unsigned), p, ok
	case typeLong, typeInt24:
		v, p, ok := readU32(b, pos)
		return appendInt(dst, uint64(v), int64(int32(v)), unsigned), p, ok
	case typeLongLong:
		v, p, ok := readU64(b, pos)
		return appendInt(dst, v, int64(v), unsigned), p, ok
	case typeFloat:
		v, p, ok := readU32(b, pos)
		return appendFloat(dst, float64(math.Float32frombits(v)), 32), p, ok
	case typeDouble:
		v, p, ok := readU64(b, pos)
		return appendFloat(dst, math.Float64frombits(v), 64), p, ok
	case typeDate, typeDateTime, typeTimestamp, typeNewDate, typeTimestamp2, typeDateTime2:
		return renderDateTime(dst, typ, b, pos)
	case typeTime, typeTime2:
		return renderTime(dst, b, pos)
	case typeDecimal, typeNewDecimal:
		s, p, ok := readLenEncBytes(b, pos)
		if !ok || !isNumeric(s) {
			return appendQuoted(dst, s), p, ok
		}
		return append(dst, s...), p, true
	case typeBit, typeGeometry:
		s, p, ok := readLenEncBytes(b, pos)
		return appendHex(dst, s), p, ok
	case typeVarchar, typeJSON, typeEnum, typeSet, typeTinyBlob, typeMediumBlob,
		typeLongBlob, typeBlob, typeVarString, typeString:
		s, p, ok := readLenEncBytes(b, pos)
		return appendQuoted(dst, s), p, ok
	}
	return dst, pos, false
}

func appendInt(dst []byte, u uint64, s int64, unsigned bool) []byte {
	if unsigned {
		return strconv.AppendUint(dst, u, 10)
	}
	return strconv.AppendInt(dst, s, 10)
}

// appendFloat renders a float; NaN and infinities are not SQL numbers, so
// they become strings.
func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		dst = append(dst, '\'')
		dst = strconv.AppendFloat(dst, f, 'g', -1, bits)
		return append(dst, '\'')
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func isNumeric(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
			return false
		}
	}
	return true
}

// renderDateTime renders a binary DATE/DATETIME/TIMESTAMP: a length byte
// (0, 4, 7 or 11) then year(2) month day [hour minute second [microseconds(4)]].
func renderDateTime(dst []byte, typ byte, b []byte, pos int) ([]byte, int, bool) {
	n, pos, ok := readU8(b, pos)
	if !ok || pos+int(n) > len(b) || (n != 0 && n != 4 && n != 7 && n != 11) {
		return dst, pos, false
	}
	v := b[pos : pos+int(n)]
	var year, mon, day, hh, mm, ss, us int
	if n >= 4 {
		year, mon, day = int(v[0])|int(v[1])<<8, int(v[2]), int(v[3])
	}
	if n >= 7 {
		hh, mm, ss = int(v[4]), int(v[5]), int(v[6])
	}
	if n == 11 {
		us = int(v[7]) | int(v[8])<<8 | int(v[9])<<16 | int(v[10])<<24
	}
	dst = append(dst, '\'')
	dst = appendPad(dst, year, 4)
	dst = append(dst, '-')
	dst = appendPad(dst, mon, 2)
	dst = append(dst, '-')
	dst = appendPad(dst, day, 2)
	if typ != typeDate && typ != typeNewDate {
		dst = appendClock(dst, hh, mm, ss, us, ' ')
	}
	return append(dst, '\''), pos + int(n), true
}

// renderTime renders a binary TIME: length (0, 8, 12), sign, days(4),
// hour, minute, second [microseconds(4)].
func renderTime(dst []byte, b []byte, pos int) ([]byte, int, bool) {
	n, pos, ok := readU8(b, pos)
	if !ok || pos+int(n) > len(b) || (n != 0 && n != 8 && n != 12) {
		return dst, pos, false
	}
	v := b[pos : pos+int(n)]
	var neg bool
	var days uint32
	var hh, mm, ss, us int
	if n >= 8 {
		neg = v[0] == 1
		days, _, _ = readU32(v, 1)
		hh, mm, ss = int(v[5]), int(v[6]), int(v[7])
	}
	if n == 12 {
		us = int(v[8]) | int(v[9])<<8 | int(v[10])<<16 | int(v[11])<<24
	}
	dst = append(dst, '\'')
	if neg {
		dst = append(dst, '-')
	}
	dst = appendPad(dst, int(days)*24+hh, 2)
	dst = appendClock(dst[:len(dst)], -1, mm, ss, us, ':')
	return append(dst, '\''), pos + int(n), true
}

// appendClock appends [sep]HH:MM:SS[.ffffff]; hh < 0 means the hours are
// already written.
func appendClock(dst []byte, hh, mm, ss, us int, sep byte) []byte {
	dst = append(dst, sep)
	if hh >= 0 {
		dst = appendPad(dst, hh, 2)
		dst = append(dst, ':')
	}
	dst = appendPad(dst, mm, 2)
	dst = append(dst, ':')
	dst = appendPad(dst, ss, 2)
	if us > 0 {
		dst = append(dst, '.')
		dst = appendPad(dst, us, 6)
	}
	return dst
}

func appendPad(dst []byte, v, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// appendQuoted renders bytes as a quoted SQL string with MySQL escapes, or
// as a hex literal when they are not valid UTF-8 (binary data).
func appendQuoted(dst, s []byte) []byte {
	if !utf8.Valid(s) {
		return appendHex(dst, s)
	}
	dst = append(dst, '\'')
	for _, c := range s {
		switch c {
		case 0:
			dst = append(dst, '\\', '0')
		case '\'':
			dst = append(dst, '\\', '\'')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case 0x1a:
			dst = append(dst, '\\', 'Z')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '\'')
}

func appendHex(dst, s []byte) []byte {
	const digits = "0123456789ABCDEF"
	dst = append(dst, 'X', '\'')
	for _, c := range s {
		dst = append(dst, digits[c>>4], digits[c&0xf])
	}
	return append(dst, '\'')
}
