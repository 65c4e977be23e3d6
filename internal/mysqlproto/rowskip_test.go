package mysqlproto

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
)

// Rows arriving whole in a chunk are counted by their headers (skipRows);
// fed one byte at a time no chunk holds a whole row, so every row goes
// through the packet-by-packet path. Both must give the same exchanges,
// and the right ones: every row counted, the response's bytes and times,
// the end marker's status, an error or a progress report among the rows.
func TestRowsSkippedByLength(t *testing.T) {
	row := []any{"68487932199-96439406143", int64(42)}
	rows := func(n int) [][]any {
		r := make([][]any, n)
		for i := range r {
			r[i] = row
		}
		return r
	}
	for _, deprecate := range []bool{false, true} {
		for _, binaryRows := range []bool{false, true} {
			name := fmt.Sprintf("deprecate=%v binary=%v", deprecate, binaryRows)
			s := newScript(deprecate)
			s.handshake()
			// 500 rows and the end marker in one chunk.
			s.client(query("SELECT c, k FROM t"))
			s.server(s.resultPayloads(2, rows(500), 2, binaryRows)...)
			// Rows, an ERR among them.
			s.client(query("SELECT c, k FROM t WHERE boom"))
			head := s.resultPayloads(2, rows(7), 2, binaryRows)
			s.server(append(head[:len(head)-1], errPayload(1317, "70100", "Query execution was interrupted"))...)
			// Rows, a progress report, more rows.
			s.client(query("SELECT c, k FROM t ORDER BY k"))
			ps := s.resultPayloads(2, rows(6), 2, binaryRows)
			at := len(ps) - 4
			ps = append(ps[:at], append([][]byte{progressPayload()}, ps[at:]...)...)
			s.server(ps...)
			whole, _ := decodeChunks(s.chunks, Options{}, nil)
			bytewise, _ := decodeChunks(s.chunks, Options{}, func(b []byte) [][]byte {
				out := make([][]byte, len(b))
				for i := range b {
					out[i] = b[i : i+1]
				}
				return out
			})
			if !reflect.DeepEqual(whole.exs, bytewise.exs) {
				t.Fatalf("%s: whole chunks and byte by byte differ:\n%+v\n%+v", name, whole.exs, bytewise.exs)
			}
			exs := whole.exs
			if len(exs) != 3 {
				t.Fatalf("%s: %d exchanges, want 3", name, len(exs))
			}
			wantBytes := func(i int) int64 { return int64(len(s.chunks[4+2*i].data)) } // 3 handshake chunks, then query, answer
			for i, want := range []struct {
				rows int64
				err  uint16
			}{{500, 0}, {7, 1317}, {6, 0}} {
				ex := exs[i]
				if ex.Rows != want.rows || ex.RespBytes != wantBytes(i) || ex.Incomplete || ex.ResultSets != 1 {
					t.Errorf("%s #%d: rows %d (want %d), resp bytes %d (want %d), incomplete %v, result sets %d",
						name, i, ex.Rows, want.rows, ex.RespBytes, wantBytes(i), ex.Incomplete, ex.ResultSets)
				}
				if code := errCode(ex.Err); code != want.err {
					t.Errorf("%s #%d: error %d, want %d", name, i, code, want.err)
				}
				if ts := s.chunks[4+2*i].ts; ex.RespFirst != ts || ex.RespLast != ts {
					t.Errorf("%s #%d: response at %d..%d, want %d", name, i, ex.RespFirst, ex.RespLast, ts)
				}
			}
			if exs[0].Status != 2 {
				t.Errorf("%s: end marker status %d, want 2", name, exs[0].Status)
			}
		}
	}
}

// Rows split across chunks: the whole ones are skipped, the split one is
// framed, and none is lost or counted twice.
func TestRowsSkippedAcrossChunks(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(query("SELECT c FROM t"))
	rows := make([][]any, 300)
	for i := range rows {
		rows[i] = []any{fmt.Sprintf("row %d %040d", i, i)}
	}
	s.server(s.resultPayloads(1, rows, 2, false)...)
	for _, size := range []int{7, 60, 61, 1000, 1460, 65536} {
		r, _ := decodeChunks(s.chunks, Options{}, func(b []byte) [][]byte {
			var out [][]byte
			for len(b) > size {
				out, b = append(out, b[:size]), b[size:]
			}
			return append(out, b)
		})
		if len(r.exs) != 1 || r.exs[0].Rows != 300 || r.exs[0].RespBytes != int64(len(s.chunks[len(s.chunks)-1].data)) || r.exs[0].Incomplete {
			t.Errorf("pieces of %d: %+v", size, r.exs)
		}
	}
}

func errCode(e *ErrInfo) uint16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// progressPayload is a MariaDB progress report (0xFF, code 0xFFFF).
func progressPayload() []byte {
	b := []byte{0xff}
	b = binary.LittleEndian.AppendUint16(b, progressCode)
	return append(b, 1, 1, 2, 0, 0, 0, 0, 0, 0)
}
