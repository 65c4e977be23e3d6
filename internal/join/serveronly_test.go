package join

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// A server-only statement's sql is the row's SQL_TEXT redacted as the
// capture redacts a wire statement's (gapscope's digest text and the
// trailing sqlcommenter comment), or the text as sent with
// --keep-literals; the server's digest stays its digest.
func TestServerOnlyText(t *testing.T) {
	const (
		plain     = "SELECT SLEEP(0.15) /* via_socket */"
		commented = "SELECT * FROM shop.cart WHERE user_id = 4217 AND note = 'gift' /*route='%2Fcart',traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'*/"
	)
	norm := sqltext.NewNormalizer(10)
	for _, tc := range []struct {
		name, text string
		keep       bool
		wantSQL    string
		wantTags   map[string]string
	}{
		{"keep-literals", plain, true, plain, nil},
		{"redacted", plain, false, "select sleep(?)", nil},
		{"keep-literals commented", commented, true, commented, map[string]string{"route": "/cart", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{"redacted commented", commented, false,
			"select * from shop.cart where user_id = ? and note = ? /*route='%2Fcart',traceparent='00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'*/",
			map[string]string{"route": "/cart", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := socketRow(tc.text)
			s := ServerOnly(&r, event.UnixSocket, NewServerText(tc.keep))
			if s.SQL != tc.wantSQL {
				t.Errorf("sql %q, want %q", s.SQL, tc.wantSQL)
			}
			if !tc.keep && (strings.Contains(s.SQL, "4217") || strings.Contains(s.SQL, "gift") || strings.Contains(s.SQL, "0.15")) {
				t.Errorf("a literal left in redacted sql %q", s.SQL)
			}
			_, fp := norm.Normalize([]byte(tc.text))
			if s.Fingerprint != fp || s.Digest != r.Digest || s.DigestText != r.DigestText {
				t.Errorf("fingerprint %q (want gapscope's %q), digest %q %q (want the server's)", s.Fingerprint, fp, s.Digest, s.DigestText)
			}
			if !maps.Equal(s.Tags, tc.wantTags) {
				t.Errorf("tags %v, want %v", s.Tags, tc.wantTags)
			}
			if s.Why != event.UnixSocket || !slices.Equal(s.Notes, []string{event.UnixSocket.Text()}) {
				t.Errorf("why %v notes %v", s.Why, s.Notes)
			}
			if s.ServerUS != 150_000 || s.Cmd != "COM_QUERY" || s.ConnID != 7 {
				t.Errorf("server %d µs, cmd %s, conn %d", s.ServerUS, s.Cmd, s.ConnID)
			}
		})
	}
}

// A text performance_schema cut (performance_schema_max_sql_text_length),
// or one whose start alone was read, is shown cut, redacted like a whole
// one, with a note; the server's digest text stands in only when the cut
// left no SQL, or there is no text at all.
func TestServerOnlyTextCut(t *testing.T) {
	const cutText = "SELECT c FROM t WHERE id = 99 AND pad = 'aaaaaaaaaa..." // what the server shows of a longer text
	for _, tc := range []struct {
		name    string
		text    string
		cut     collect.TextCut
		keep    bool
		wantSQL string
		note    string
	}{
		{"server cut, keep-literals", cutText, collect.TextCutByServer, true, cutText, noteTextCutByServer},
		{"server cut, redacted", cutText, collect.TextCutByServer, false, "select c from t where id = ? and pad = ? ...", noteTextCutByServer},
		{"read cut, redacted", "SELECT c FROM t WHERE id = 99 AND pad = 'aaaaaaaaaa", collect.TextCutByRead, false, "select c from t where id = ? and pad = ? ...", noteTextCutByRead},
		{"read cut, keep-literals", "SELECT c FROM t WHERE id = 99 AND pad = 'aaaaaaaaaa", collect.TextCutByRead, true, cutText, noteTextCutByRead},
		{"cut inside a leading comment", "/* a comment longer than the server kept...", collect.TextCutByServer, true, "SELECT `c` FROM `t` WHERE `id` = ? AND `pad` = ? ", noteTextFromDigest},
		{"no text", "", collect.TextWhole, true, "SELECT `c` FROM `t` WHERE `id` = ? AND `pad` = ? ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := socketRow(tc.text)
			r.TextCut = tc.cut
			r.DigestText = "SELECT `c` FROM `t` WHERE `id` = ? AND `pad` = ? "
			s := ServerOnly(&r, event.NoCapture, NewServerText(tc.keep))
			if s.SQL != tc.wantSQL {
				t.Errorf("sql %q, want %q", s.SQL, tc.wantSQL)
			}
			if hasNote := tc.note != "" && slices.Contains(s.Notes, tc.note); hasNote != (tc.note != "") || len(s.Notes) != 1+btoi(tc.note != "") {
				t.Errorf("notes %v, want the reason's and %q", s.Notes, tc.note)
			}
			if s.Fingerprint != "" || s.Digest != r.Digest {
				t.Errorf("fingerprint %q of a cut text (exporters key on the server's digest text), digest %q", s.Fingerprint, s.Digest)
			}
		})
	}
}

// Without the server's digest (statements_digest off), the digest and its
// text are gapscope's; a command whose text is no SQL keeps it as it is.
func TestServerOnlyTextOwnDigest(t *testing.T) {
	r := socketRow("SELECT 1 FROM dual WHERE 2 = 3")
	r.Digest, r.DigestText = "", ""
	s := ServerOnly(&r, event.UnixSocket, NewServerText(false))
	digestText, digest := sqltext.NewNormalizer(10).Normalize([]byte(r.SQLText))
	if s.Digest != digest || s.DigestText != digestText || s.SQL != digestText {
		t.Errorf("digest %q %q sql %q, want gapscope's %q %q", s.Digest, s.DigestText, s.SQL, digest, digestText)
	}
	r = socketRow("shop")
	r.EventName = "statement/com/Init DB"
	if s := ServerOnly(&r, event.UnixSocket, NewServerText(false)); s.SQL != "shop" || s.Cmd != "COM_INIT_DB" {
		t.Errorf("COM_INIT_DB: sql %q cmd %s", s.SQL, s.Cmd)
	}
}

func socketRow(text string) collect.ServerStatement {
	return collect.ServerStatement{ThreadID: 70, EventID: 3, ConnID: 7, Socket: true, EventName: "statement/sql/select",
		SQLText: text, Digest: "5d3a1f0e9c2b4a6f8e7d6c5b4a3f2e1d", DigestText: "SELECT `SLEEP` (?) ",
		TimerWait: 150_000 * collect.PicosPerMicro, StartUS: 1_000_000, EndUS: 1_150_000, RowsSent: 1}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A replica's binlog stream row (written when the replica left, its
// TIMER_WAIT the stream's life) is no statement: the joiner counts it and
// matches nothing with it, and read without the wire it is reported as a
// stream, not as a statement of its own.
func TestReplicaStreamRows(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	j.AddServer([]collect.ServerStatement{
		row(4, "statement/sql/select", "SELECT @@GLOBAL.gtid_domain_id", 1_000, 1_100),
		row(4, "statement/com/Binlog Dump", "", 2_000, 9_002_000),
	}, 9_500_000)
	j.FlushAll()
	st := j.Stats()
	if st.Streams != 1 || st.UnmatchedServer != 1 || len(rec.out) != 0 {
		t.Errorf("streams %d, unmatched rows %d (%v), emitted %d: the stream's row is counted apart", st.Streams, st.UnmatchedServer, st.UnmatchedByReason, len(rec.out))
	}
	r := row(4, "statement/com/Binlog Dump", "", 2_000, 9_002_000)
	s := ServerOnly(&r, event.NoCapture, NewServerText(false))
	if s.Why != event.ReplicaStream || s.Cmd != "COM_BINLOG_DUMP" || !slices.Equal(s.Notes, []string{event.ReplicaStream.Text()}) {
		t.Errorf("server-only stream row: why %v cmd %s notes %v", s.Why, s.Cmd, s.Notes)
	}
}
