package mysqlproto

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/gapscope/gapscope/internal/sandbox"
)

var writeCorpus = flag.Bool("write-corpus", false, "write the recorded streams as fuzz seeds under testdata/fuzz")

// One sandbox serves every test of the package: starting one costs seconds.
var shared struct {
	once sync.Once
	inst *sandbox.Instance
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.inst != nil {
		shared.inst.Stop()
	}
	os.Exit(code)
}

// sharedSandbox returns the package's sandbox (big packets and LOCAL
// INFILE allowed, schema created), starting it on first use. It skips under
// -short like sandbox.ForTest.
func sharedSandbox(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	shared.once.Do(func() {
		opts := sandbox.Options{ServerArgs: []string{"--max-allowed-packet=64M", "--local-infile=1"}}
		if shared.inst, shared.err = sandbox.Start(context.Background(), opts); shared.err == nil {
			shared.err = setupSchema(shared.inst)
		}
	})
	if shared.err != nil {
		t.Fatalf("starting sandbox: %v", shared.err)
	}
	return shared.inst
}

// recProxy is a TCP proxy that records both directions of every
// connection with capture times, in the order the bytes went through.
type recProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*recConn
	wg     sync.WaitGroup
}

type recConn struct {
	mu     sync.Mutex
	chunks []chunk
}

func startProxy(t *testing.T, target string) *recProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *recProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		rc := &recConn{}
		p.mu.Lock()
		p.conns = append(p.conns, rc)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(rc, ClientToServer, c, s)
		go p.pipe(rc, ServerToClient, s, c)
	}
}

// pipe records each read before forwarding it, so a response is always
// recorded after the request that caused it.
func (p *recProxy) pipe(rc *recConn, dir Direction, from, to net.Conn) {
	defer p.wg.Done()
	defer to.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			rc.mu.Lock()
			rc.chunks = append(rc.chunks, chunk{dir: dir, ts: time.Now().UnixMicro(), data: bytes.Clone(buf[:n])})
			rc.mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// recorded waits for the proxy's connections to end and returns them.
func (p *recProxy) recorded(t *testing.T) [][]chunk {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("proxied connections did not end")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]chunk, len(p.conns))
	for i, c := range p.conns {
		out[i] = c.chunks
	}
	return out
}

func setupSchema(inst *sandbox.Instance) error {
	db, err := inst.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE DATABASE gs",
		"CREATE TABLE gs.t (id INT PRIMARY KEY, name VARCHAR(20))",
		"CREATE TABLE gs.p (i BIGINT, s VARCHAR(20), f DOUBLE, n INT, d DATETIME, b BLOB)",
		"CREATE TABLE gs.big (b LONGBLOB)",
		"CREATE TABLE gs.li (a INT, b VARCHAR(10))",
		"CREATE PROCEDURE gs.two() BEGIN SELECT id, name FROM gs.t ORDER BY id; SELECT 1, 2, 3 FROM DUAL; END",
	} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// TestSandboxGoDriver drives a real MariaDB through the recording proxy
// with go-sql-driver/mysql and checks the decoder's view of the bytes.
func TestSandboxGoDriver(t *testing.T) {
	inst := sharedSandbox(t)
	proxy := startProxy(t, inst.Addr())

	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", proxy.ln.Addr().String(), "gs"
	cfg.MultiStatements = true
	cfg.MaxAllowedPacket = 64 << 20
	cfg.Loc = time.UTC
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	blob := bytes.Repeat([]byte{0xab, 0xcd}, 17<<19) // 17 MiB
	driveGoDriver(t, db, blob)
	db.Close()

	conns := proxy.recorded(t)
	if len(conns) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(conns))
	}
	saveCorpus(t, "godriver", conns[0])
	for _, split := range []struct {
		name string
		fn   func([]byte) [][]byte
	}{{"as recorded", nil}, {"7-byte pieces", func(b []byte) [][]byte { return splitEvery(b, 7) }}} {
		r, d := decodeChunks(conns[0], Options{}, split.fn)
		checkOrder(t, r.exs)
		checkGoDriverExchanges(t, split.name, r.exs, d.Info(), len(blob))
	}
}

func driveGoDriver(t *testing.T, db *sql.DB, blob []byte) {
	ctx := context.Background()
	mustExec := func(q string, args ...any) {
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')")
	countRows(t, db, "SELECT id, name FROM t ORDER BY id")
	if _, err := db.ExecContext(ctx, "SELEC 1"); err == nil {
		t.Fatal("syntax error not reported")
	}
	mustExec("INSERT INTO p VALUES (?,?,?,?,?,?)", int64(7), "str'q", 3.25, nil,
		time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), []byte{0xff, 0xfe})
	countRows(t, db, "SELECT name FROM t WHERE id = ?", 2)
	countRows(t, db, "SELECT 1; SELECT 2, 3 UNION SELECT 4, 5")
	countRows(t, db, "CALL two()")
	countRows(t, db, "SELECT seq, REPEAT('x', 100) FROM seq_1_to_20000")
	mustExec("INSERT INTO big VALUES (?)", blob)
	countRows(t, db, "SELECT b FROM big")
}

// countRows reads every row of every result set.
func countRows(t *testing.T, db *sql.DB, q string, args ...any) int {
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	n := 0
	for {
		for rows.Next() {
			n++
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func checkGoDriverExchanges(t *testing.T, name string, exs []Exchange, info *ConnInfo, blobLen int) {
	t.Helper()
	if !info.SeenHandshake || !info.AuthOK || info.User != "root" || info.DB != "gs" ||
		!strings.Contains(info.ServerVersion, "MariaDB") || info.ConnID == 0 {
		t.Errorf("%s: info %+v", name, info)
	}
	find := func(cmd, sqlPrefix string, nth int) *Exchange {
		for i := range exs {
			if exs[i].CmdName == cmd && strings.HasPrefix(string(exs[i].SQL), sqlPrefix) {
				if nth == 0 {
					return &exs[i]
				}
				nth--
			}
		}
		t.Fatalf("%s: no %s %q among %+v", name, cmd, sqlPrefix, summaries(exs))
		return nil
	}
	expect := func(ex *Exchange, rows int64, resultSets int, params string) {
		t.Helper()
		s := summarize(ex)
		if s.Rows != rows || s.ResultSets != resultSets || s.Params != params || s.Err != "" || s.Incomplete {
			t.Errorf("%s: %s %.60q: got %+v, want rows=%d resultSets=%d params=%q", name, s.Cmd, s.SQL, s, rows, resultSets, params)
		}
	}
	expect(find("COM_QUERY", "INSERT INTO t VALUES", 0), 3, 0, "")
	expect(find("COM_QUERY", "SELECT id, name FROM t", 0), 3, 1, "")
	if e := find("COM_QUERY", "SELEC 1", 0).Err; e == nil || e.Code != 1064 || e.State != "42000" {
		t.Errorf("%s: syntax error decoded as %+v", name, e)
	}
	find("COM_STMT_PREPARE", "INSERT INTO p VALUES", 0)
	expect(find("COM_STMT_EXECUTE", "INSERT INTO p VALUES", 0), 1, 0, `7,'str\'q',3.25,NULL,'2024-01-02 03:04:05',X'FFFE'`)
	expect(find("COM_STMT_EXECUTE", "SELECT name FROM t WHERE id = ?", 0), 1, 1, "2")
	if c := find("COM_STMT_CLOSE", "SELECT name FROM t WHERE id = ?", 0); !c.NoResponse || c.RespLast != 0 {
		t.Errorf("%s: COM_STMT_CLOSE %+v", name, summarize(c))
	}
	expect(find("COM_QUERY", "SELECT 1; SELECT 2", 0), 3, 2, "")
	expect(find("COM_QUERY", "CALL two()", 0), 4, 2, "")
	big := find("COM_QUERY", "SELECT seq", 0)
	expect(big, 20000, 1, "")
	if big.RespBytes < 20000*100 {
		t.Errorf("%s: large result RespBytes = %d", name, big.RespBytes)
	}
	ins := find("COM_STMT_EXECUTE", "INSERT INTO big", 0)
	if len(ins.Params) != 1 || len(ins.Params[0]) != 2*blobLen+3 || ins.ReqBytes < int64(blobLen) {
		t.Errorf("%s: 17 MiB blob param: %d params, ReqBytes %d", name, len(ins.Params), ins.ReqBytes)
	}
	sel := find("COM_QUERY", "SELECT b FROM big", 0)
	if sel.Rows != 1 || sel.RespBytes < int64(blobLen) {
		t.Errorf("%s: 17 MiB row: rows %d RespBytes %d", name, sel.Rows, sel.RespBytes)
	}
	if last := exs[len(exs)-1]; last.CmdName != "COM_QUIT" || !last.NoResponse {
		t.Errorf("%s: last exchange %+v, want COM_QUIT", name, summarize(&last))
	}
	for i := range exs {
		if exs[i].Incomplete {
			t.Errorf("%s: incomplete exchange %+v", name, summarize(&exs[i]))
		}
	}
}

// TestSandboxCLICompressedInfile drives the mariadb client with
// --compress and LOAD DATA LOCAL INFILE through the proxy.
func TestSandboxCLICompressedInfile(t *testing.T) {
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatal("the mariadb client is required for this test: install mariadb-client")
	}
	inst := sharedSandbox(t)
	proxy := startProxy(t, inst.Addr())
	csv := filepath.Join(t.TempDir(), "rows.csv")
	var data strings.Builder
	for i := range 500 {
		fmt.Fprintf(&data, "%d,r%d\n", i, i)
	}
	if err := os.WriteFile(csv, []byte(data.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(proxy.ln.Addr().String())
	script := fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li FIELDS TERMINATED BY ',';\n"+
		"SELECT COUNT(*) FROM li;\nSELECT seq, REPEAT('y', 200) FROM seq_1_to_300;\nSELECT nosuchcolumn FROM li;\n", csv)
	cmd := exec.Command(cli, "--no-defaults", "--protocol=tcp", "-h", host, "-P", port, "-uroot",
		"--compress", "--local-infile=1", "--force", "-D", "gs")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) { // the last statement fails on purpose
		t.Fatalf("mariadb: %v\n%s", err, out)
	}
	conns := proxy.recorded(t)
	if len(conns) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(conns))
	}
	saveCorpus(t, "cli_compressed", conns[0])
	r, d := decodeChunks(conns[0], Options{}, nil)
	checkOrder(t, r.exs)
	if !d.Info().Compressed {
		t.Fatalf("compression not detected: %+v", d.Info())
	}
	got := map[string]summary{}
	for i := range r.exs {
		s := summarize(&r.exs[i])
		got[s.SQL] = s
	}
	load := got[fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li FIELDS TERMINATED BY ','", csv)]
	if load.Rows != 500 || load.Note != noteLocalInfile || load.Err != "" {
		t.Errorf("LOAD DATA: %+v (all: %+v)", load, summaries(r.exs))
	}
	if s := got["SELECT COUNT(*) FROM li"]; s.Rows != 1 || s.ResultSets != 1 {
		t.Errorf("COUNT: %+v", s)
	}
	if s := got["SELECT seq, REPEAT('y', 200) FROM seq_1_to_300"]; s.Rows != 300 {
		t.Errorf("REPEAT: %+v", s)
	}
	if s := got["SELECT nosuchcolumn FROM li"]; !strings.HasPrefix(s.Err, "1054 42S22") {
		t.Errorf("error: %+v", s)
	}
	if last := r.exs[len(r.exs)-1]; last.CmdName != "COM_QUIT" {
		t.Errorf("last exchange %+v", summarize(&last))
	}
	// The same bytes fed in odd-sized pieces decode identically.
	r2, _ := decodeChunks(conns[0], Options{}, func(b []byte) [][]byte { return splitEvery(b, 5) })
	if len(r2.exs) != len(r.exs) {
		t.Errorf("5-byte pieces: %d exchanges, want %d", len(r2.exs), len(r.exs))
	}
}

// saveCorpus writes up to 64 KiB of a recorded stream as fuzz seeds when
// -write-corpus is given: from the start, and from the middle with
// MidStream set.
func saveCorpus(t *testing.T, name string, chunks []chunk) {
	if !*writeCorpus {
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzConnDecoder")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, from := range []int{0, len(chunks) / 3} {
		var enc []byte
		for _, c := range chunks[from:] {
			if len(enc)+len(c.data) > 64<<10 {
				break
			}
			enc = appendFuzzRecord(enc, c.dir, false, c.data)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", enc, from > 0)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("recorded_%s_%d", name, i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
