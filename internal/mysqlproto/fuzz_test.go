package mysqlproto

import (
	"testing"
)

// Fuzz input for FuzzConnDecoder: records of [flags][len lo][len hi][data];
// flags bit 0 is the direction, bit 1 asks for a Gap before the data.
func appendFuzzRecord(dst []byte, dir Direction, gap bool, data []byte) []byte {
	for len(data) > 0 {
		n := min(len(data), 0xffff)
		flags := byte(dir)
		if gap {
			flags |= 2
		}
		dst = append(dst, flags, byte(n), byte(n>>8))
		dst = append(dst, data[:n]...)
		data = data[n:]
	}
	return dst
}

// orderChecker asserts the emission invariants while fuzzing.
type orderChecker struct {
	t    *testing.T
	prev int64
}

func (o *orderChecker) OnExchange(ex *Exchange, info *ConnInfo) {
	if ex.ReqFirst < o.prev {
		o.t.Fatalf("exchange starts at %d, before the previous one at %d", ex.ReqFirst, o.prev)
	}
	o.prev = ex.ReqFirst
	if ex.RespLast != 0 && (ex.ReqFirst > ex.RespLast || ex.RespFirst > ex.RespLast) {
		o.t.Fatalf("exchange times out of order: %+v", ex)
	}
	if ex.CmdName == "" || info == nil {
		o.t.Fatalf("exchange without a command name: %+v", ex)
	}
	if ex.Rows < 0 || ex.ReqBytes < 0 || ex.RespBytes < 0 {
		o.t.Fatalf("negative counts: %+v", ex)
	}
}

func FuzzConnDecoder(f *testing.F) {
	for _, c := range decodeCases {
		for _, v := range variants {
			var enc []byte
			for _, ch := range buildCase(c, v.deprecate, v.compress) {
				enc = appendFuzzRecord(enc, ch.dir, false, ch.data)
			}
			f.Add(enc, false)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, midStream bool) {
		h := &orderChecker{t: t}
		d := NewConnDecoder(h, Options{MidStream: midStream, MaxBuffered: 1 << 20})
		ts := int64(1)
		for len(data) >= 3 {
			flags, n := data[0], int(data[1])|int(data[2])<<8
			data = data[3:]
			n = min(n, len(data))
			dir := Direction(flags & 1)
			ts++
			if flags&2 != 0 {
				d.Gap(dir, ts)
			}
			d.Feed(dir, ts, data[:n])
			data = data[n:]
		}
		d.Close(ts + 1)
	})
}

// FuzzPacket runs the single-message parsers on arbitrary payloads.
func FuzzPacket(f *testing.F) {
	f.Add(greetingPayload("10.11.6-MariaDB", 1, testCaps, 0, "mysql_native_password"))
	f.Add(loginPayload(testCaps, "u", "db", "p"))
	f.Add(okPayload(0, 1, 2, 3, 4))
	f.Add(errPayload(1064, "42000", "x"))
	f.Add(eofPayload(0, 2))
	f.Add(execPayload(1, 0, true, int64(1), "a", nil, dt{2024, 1, 1, 0, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseGreeting(b)
		parseLogin(b, testCaps|capConnectAttrs)
		parseLogin(b, capSecureConnection|capConnectWithDB|capPluginAuth)
		if len(b) > 0 {
			parseOK(b, true)
			parseErr(b)
			parseEOF(b)
		}
		LooksLikeGreeting(b)
		LooksLikeCommand(b)
		looksLikeCompressedCommand(b)
		InterpolateParams(nil, b, [][]byte{[]byte("1")})
		for typ := range 256 {
			if out, pos, ok := renderValue(nil, byte(typ), 0x80, b, 0); ok && (pos > len(b) || pos < 0) {
				t.Fatalf("type %#x read to %d of %d (%q)", typ, pos, len(b), out)
			}
		}
		// A statement with params decoded from arbitrary execute bytes.
		d := NewConnDecoder(nil, Options{})
		d.addStmt(1, []byte("SELECT ?, ?, ?"), 3)
		h := &pending{raw: append([]byte{comStmtExecute, 1, 0, 0, 0}, b...)}
		d.startExecute(h)
		if h.ex.Params != nil && len(h.ex.Params) != 3 {
			t.Fatalf("%d params for 3 placeholders", len(h.ex.Params))
		}
	})
}
