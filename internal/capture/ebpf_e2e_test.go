//go:build linux

package capture

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gapscope/gapscope/internal/event"
	"golang.org/x/sys/unix"
)

// ebpfUnavailable reports whether opening the eBPF capture failed because
// the kernel or the process's capabilities lack it (a skip), rather than
// because of a bug (a failure).
func ebpfUnavailable(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS)
}

// openTestEBPF opens the eBPF capture on lo, skipping only where the kernel
// or the capabilities do not allow it.
func openTestEBPF(t testing.TB, opts LiveOptions) *EBPF {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the eBPF capture needs CAP_BPF and CAP_NET_ADMIN (root)")
	}
	e, err := OpenEBPF("lo", opts)
	if ebpfUnavailable(err) {
		t.Skipf("no eBPF capture on this kernel or without these capabilities: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// running is a capture started by startSource: its statements once it
// stopped, and a channel that gets every statement's SQL as it comes.
type running struct {
	src   Source
	done  chan Stats
	got   []*event.Statement
	seen  chan string
	stop  context.CancelFunc
	stats Stats
}

func startSource(t *testing.T, src Source) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{src: src, done: make(chan Stats, 1), seen: make(chan string, 4096), stop: cancel}
	go func() {
		st, err := src.Run(ctx, func(s *event.Statement) {
			r.got = append(r.got, s)
			select { // emit must never block
			case r.seen <- s.SQL:
			default:
			}
		})
		if err != nil {
			t.Errorf("%s: %v", src.Describe(), err)
		}
		r.done <- st
	}()
	return r
}

// await waits for a statement whose SQL contains marker, then stops the
// capture.
func (r *running) await(t *testing.T, marker string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for found := false; !found; {
		select {
		case sql := <-r.seen:
			found = strings.Contains(sql, marker)
		case <-deadline:
			t.Errorf("%s: %q not captured within 20 s", r.src.Describe(), marker)
			found = true
		}
	}
	r.stop()
	r.stats = <-r.done
}

// TestEndToEndEBPF runs the header-only eBPF capture and the AF_PACKET ring
// side by side on lo against a sandbox, through a workload with answers
// short (whole in the record) and long (cut in the kernel), a slow
// statement, a client of the compressed protocol, whose connection the
// kernel switches to whole answers from its handshake, and a request of
// more than 16 MB (several MySQL packets). Every statement the ring
// decodes, the eBPF capture decodes too, with the same text, bytes and
// error; the same rows, but for a cut answer, whose rows it says are
// unknown; times in order and a slow statement as slow as it was.
func TestEndToEndEBPF(t *testing.T) {
	inst := server(t)
	opts := LiveOptions{Options: Options{Ports: []uint16{uint16(inst.Port)}, KeepLiterals: true}}
	e := openTestEBPF(t, opts)
	l, err := OpenLive("lo", opts)
	if err != nil {
		t.Fatal(err)
	}
	eb, pk := startSource(t, e), startSource(t, l)

	exp := runWorkload(t, inst, "ebpf")
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const long = "SELECT seq, MD5(seq), SHA2(seq, 256) FROM cap_ebpf.seq_1_to_2000"
	rows, err := db.Query(long)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if n != 2000 {
		t.Fatalf("%d rows", n)
	}
	mustExec("SELECT SLEEP(0.05)")
	mustExec("SET GLOBAL max_allowed_packet = 67108864")
	mustExec("CREATE TABLE IF NOT EXISTS cap_ebpf.big (id INT PRIMARY KEY, v LONGTEXT)")
	mustExec("DELETE FROM cap_ebpf.big")
	big, err := sql.Open("mysql", inst.DSN("")) // new connections get the new max_allowed_packet
	if err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 17<<20)
	if _, err := big.Exec("INSERT INTO cap_ebpf.big VALUES (1, '" + payload + "')"); err != nil {
		t.Fatalf("17 MB INSERT: %v", err)
	}
	big.Close()
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatal("the mariadb client is not installed")
	}
	script := long + ";\nSELECT 'compressed-done';\n"
	cmd := exec.Command(cli, "--no-defaults", "--protocol=tcp", "-h", "127.0.0.1", "-P", strconv.Itoa(inst.Port), "-uroot", "--compress", "-N")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), "\n") < 2001 {
		t.Fatalf("mariadb --compress: %v\n%.300s", err, out)
	}
	mustExec("SELECT 'ebpf-e2e-done'")
	eb.await(t, "ebpf-e2e-done")
	pk.await(t, "ebpf-e2e-done")

	t.Logf("%s: %d statements, stats %+v", e.Describe(), len(eb.got), eb.stats)
	checkCaptured(t, eb.got, exp)
	if !strings.HasPrefix(eb.stats.Source, "ebpf") || pk.stats.Source != "packet" {
		t.Errorf("sources %q and %q", eb.stats.Source, pk.stats.Source)
	}
	if eb.stats.KernelDrops != 0 || eb.stats.CutPackets == 0 || eb.stats.FullFlows == 0 || eb.stats.Gaps != 0 {
		t.Errorf("eBPF stats %+v: want no drops and gaps, answers cut, a connection with whole answers", eb.stats)
	}
	compareSources(t, eb.got, pk.got)

	find := func(got []*event.Statement, text string) []*event.Statement {
		var out []*event.Statement
		for _, s := range got {
			if s.SQL == text {
				out = append(out, s)
			}
		}
		return out
	}
	longs := find(eb.got, long)
	if len(longs) != 2 {
		t.Fatalf("%d captures of the long answer, want the Go client's and the compressed client's", len(longs))
	}
	cut, whole := 0, 0
	for _, s := range longs {
		switch {
		case s.RowsUnknown():
			cut++
			if s.Rows != 0 || s.RespBytes < 2000*100 {
				t.Errorf("cut answer: rows %d (want 0: unknown), resp_bytes %d", s.Rows, s.RespBytes)
			}
		case s.Rows == 2000:
			whole++
		default:
			t.Errorf("long answer on %s: rows %d, notes %v", s.Conn, s.Rows, s.Notes)
		}
	}
	if cut != 1 || whole != 1 {
		t.Errorf("long answers: %d cut, %d whole; want the Go client's cut and the compressed client's whole", cut, whole)
	}
	if s := find(eb.got, "SELECT SLEEP(0.05)"); len(s) != 1 || s[0].ClientUS < 50_000 {
		t.Errorf("SELECT SLEEP(0.05): %d captured, client_us %v", len(s), s)
	}
	var huge *event.Statement
	for _, s := range eb.got {
		if strings.HasPrefix(s.SQL, "INSERT INTO cap_ebpf.big") {
			huge = s
		}
	}
	if huge == nil || huge.ReqBytes < 17<<20 || len(huge.SQL) < 17<<20 || huge.Error != nil {
		t.Errorf("the 17 MB INSERT: %v", summary(huge))
	}
}

func summary(s *event.Statement) string {
	if s == nil {
		return "not captured"
	}
	return fmt.Sprintf("req_bytes %d, sql %d bytes, error %v, notes %v", s.ReqBytes, len(s.SQL), s.Error, s.Notes)
}

// compareSources checks that the eBPF capture decoded what the ring did,
// connection by connection, in order.
func compareSources(t *testing.T, ebpfGot, packetGot []*event.Statement) {
	t.Helper()
	byConn := func(got []*event.Statement) map[string][]*event.Statement {
		m := map[string][]*event.Statement{}
		for _, s := range got {
			m[s.Conn] = append(m[s.Conn], s)
		}
		return m
	}
	eb, pk := byConn(ebpfGot), byConn(packetGot)
	if len(eb) != len(pk) {
		t.Errorf("%d connections through eBPF, %d through the ring", len(eb), len(pk))
	}
	for conn, ps := range pk {
		es := eb[conn]
		if len(es) != len(ps) {
			t.Errorf("%s: %d statements through eBPF, %d through the ring", conn, len(es), len(ps))
			continue
		}
		for i, p := range ps {
			e := es[i]
			if e.Cmd != p.Cmd || e.SQL != p.SQL || e.ReqBytes != p.ReqBytes || e.RespBytes != p.RespBytes ||
				(e.Error == nil) != (p.Error == nil) || e.ConnID != p.ConnID || e.User != p.User {
				t.Errorf("%s #%d: eBPF %s %.60q req %d resp %d err %v; ring %s %.60q req %d resp %d err %v",
					conn, i, e.Cmd, e.SQL, e.ReqBytes, e.RespBytes, e.Error, p.Cmd, p.SQL, p.ReqBytes, p.RespBytes, p.Error)
				continue
			}
			if e.Rows != p.Rows && !e.RowsUnknown() {
				t.Errorf("%s %.60q: %d rows through eBPF, %d through the ring, and not said unknown", conn, e.SQL, e.Rows, p.Rows)
			}
			if e.TReqFirst > e.TReqLast || e.TRespLast != 0 && (e.TRespFirst < e.TReqLast || e.TRespLast < e.TRespFirst) {
				t.Errorf("%s %.60q: times out of order %d %d %d %d", conn, e.SQL, e.TReqFirst, e.TReqLast, e.TRespFirst, e.TRespLast)
			}
		}
	}
}
