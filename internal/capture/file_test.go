package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gopacket/gopacket/layers"
)

// oneQuery is a complete connection with one statement.
func oneQuery(cli, srv string) (segs []seg, q, r seg) {
	c := newConv(cli, srv)
	segs = c.handshake(7, 7)
	q = c.fromClient([]byte("SELECT 1"))
	r = c.fromServer([]byte("row\n"))
	segs = append(segs, q, r, c.fin(true), c.fin(false), c.clientAck(100))
	return segs, q, r
}

func gzipFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(raw)
	zw.Close()
	out := path + ".gz"
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadFileFormatsAndLinkTypes(t *testing.T) {
	links := []layers.LinkType{linkEthernet, linkSLL, linkSLL2, linkNull, linkLoop, linkRaw, linkIPv6}
	for _, lt := range links {
		for _, ng := range []bool{false, true} {
			for _, gz := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/ng=%v/gz=%v", lt, ng, gz), func(t *testing.T) {
					cli, srv := "10.0.0.1:40000", "10.0.0.2:3306"
					if lt == linkIPv6 || lt == linkNull {
						cli, srv = "[2001:db8::1]:40000", "[2001:db8::2]:3306"
					}
					segs, q, r := oneQuery(cli, srv)
					path := writePcap(t, lt, segs)
					if ng {
						path = writePcapNG(t, lt, segs)
					}
					if gz {
						path = gzipFile(t, path)
					}
					h := newHarness(Options{})
					if err := h.t.readFiles(context.Background(), []string{path}); err != nil {
						t.Fatal(err)
					}
					if len(h.stmts) != 1 {
						t.Fatalf("%d statements", len(h.stmts))
					}
					s := h.stmts[0]
					if s.TReqFirst != q.tsUS || s.TRespLast != r.tsUS || s.Conn != cli+">"+srv {
						t.Errorf("statement %+v", s)
					}
					st := h.t.Stats()
					if st.Packets != int64(len(segs)) || st.Flows != 1 || len(st.Notes) != 0 {
						t.Errorf("stats %+v", st)
					}
				})
			}
		}
	}
}

func TestReadFileBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	segs, _, _ := oneQuery("10.0.0.1:40000", "10.0.0.2:3306")
	good, err := os.ReadFile(writePcap(t, linkEthernet, segs))
	if err != nil {
		t.Fatal(err)
	}
	unknownLink := bytes.Clone(good)
	unknownLink[20] = 147 // LINKTYPE_USER0
	var emptyGz bytes.Buffer
	gzip.NewWriter(&emptyGz).Close()
	cases := []struct {
		name string
		path string
		want func(error) bool
	}{
		{"empty", write("empty.pcap", nil), func(e error) bool { return errors.Is(e, ErrEmptyFile) }},
		{"empty gzip", write("empty.pcap.gz", emptyGz.Bytes()), func(e error) bool { return errors.Is(e, ErrEmptyFile) }},
		{"garbage", write("junk.pcap", []byte("this is not a capture file at all")), func(e error) bool { return errors.Is(e, ErrNotCapture) }},
		{"tiny", write("tiny.pcap", []byte{1, 2}), func(e error) bool { return errors.Is(e, ErrNotCapture) }},
		{"header cut", write("cut.pcap", good[:12]), func(e error) bool { return e != nil && strings.Contains(e.Error(), "truncated") }},
		{"unknown link type", write("user0.pcap", unknownLink), func(e error) bool {
			var u *UnsupportedLinkTypeError
			return errors.As(e, &u) && u.LinkType == 147
		}},
		{"missing", filepath.Join(dir, "nope.pcap"), func(e error) bool { return errors.Is(e, os.ErrNotExist) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFile(context.Background(), c.path, Options{}, func(*event.Statement) {})
			if !c.want(err) {
				t.Fatalf("error %v", err)
			}
			if !strings.Contains(err.Error(), filepath.Base(c.path)) && c.name != "missing" {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

// A file cut in the middle of a packet keeps everything before the cut and
// says so.
func TestReadFileTruncated(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := c.handshake(-1, -1)
	for i := range 5 {
		segs = append(segs, c.fromClient([]byte(fmt.Sprintf("SELECT %d", i))), c.fromServer([]byte("r\n")))
	}
	good, _ := os.ReadFile(writePcap(t, linkEthernet, segs))
	for _, gz := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "cut.pcap")
		os.WriteFile(path, good[:len(good)-3], 0o644)
		if gz {
			path = gzipFile(t, path)
		}
		h := newHarness(Options{})
		if err := h.t.readFiles(context.Background(), []string{path}); err != nil {
			t.Fatal(err)
		}
		st := h.t.Stats()
		// The last response was cut: its statement is emitted as incomplete.
		if len(h.stmts) != 5 || h.stmts[4].TRespLast != 0 || st.Packets != int64(len(segs)-1) {
			t.Errorf("gz=%v: %d statements, %d packets", gz, len(h.stmts), st.Packets)
		}
		if len(st.Notes) == 0 || !strings.Contains(st.Notes[0], "truncated") {
			t.Errorf("gz=%v: notes %v", gz, st.Notes)
		}
	}
}

func TestReadFilesContinuesConnectionsAcrossFiles(t *testing.T) {
	segs, _, _ := oneQuery("10.0.0.1:40000", "10.0.0.2:3306")
	a := writePcap(t, linkEthernet, segs[:4]) // handshake + query
	b := writePcap(t, linkEthernet, segs[4:]) // response + FINs
	h := newHarness(Options{})
	if err := h.t.readFiles(context.Background(), []string{a, b}); err != nil {
		t.Fatal(err)
	}
	if len(h.stmts) != 1 || len(h.decs) != 1 || h.t.Stats().MidStreamFlows != 0 {
		t.Fatalf("%d statements, %d decoders", len(h.stmts), len(h.decs))
	}
}

func TestReadFileCancelAndProgress(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := c.handshake(-1, -1)
	for range checkEvery {
		segs = append(segs, c.fromClient([]byte("SELECT 1")), c.fromServer([]byte("r\n")))
	}
	path := writePcap(t, linkEthernet, segs)
	var calls int
	var last [2]int64
	h := newHarness(Options{Progress: func(done, total int64) { calls++; last = [2]int64{done, total} }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.t.readFiles(ctx, []string{path})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	st := h.t.Stats()
	if st.Packets != checkEvery {
		t.Errorf("read %d packets after cancel, want %d", st.Packets, checkEvery)
	}
	fi, _ := os.Stat(path)
	if calls < 2 || last != [2]int64{fi.Size(), fi.Size()} {
		t.Errorf("progress: %d calls, last %v, size %d", calls, last, fi.Size())
	}
}
