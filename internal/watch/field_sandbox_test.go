package watch

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/go-sql-driver/mysql"
)

// fieldArgs: the server as the field tests need it (big packets, the
// statement consumers on, multi-statements allowed by the client).
var fieldArgs = append(append([]string(nil), serverArgs...), "--max-allowed-packet=64M")

// collectStatements runs watch at its default flags around load and
// returns every statement it reported whose SQL contains one of marks.
func collectStatements(t *testing.T, ctx context.Context, inst *sandbox.Instance, load func() error, marks ...string) ([]event.Statement, *Result) {
	t.Helper()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	var mu sync.Mutex
	var got []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		for _, m := range marks {
			if strings.Contains(s.SQL, m) || strings.Contains(s.DigestText, m) {
				mu.Lock()
				got = append(got, *s)
				mu.Unlock()
				return
			}
		}
	}))
	res := runDuring(t, ctx, opts, load)
	mu.Lock()
	defer mu.Unlock()
	return got, res
}

// fieldServer starts a sandbox for the field tests and runs setup on it,
// returning it with a connection pool the caller may use (closed with the
// test) and the test's context.
func fieldServer(t *testing.T, setup ...string) (*sandbox.Instance, *sql.DB, context.Context) {
	t.Helper()
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: fieldArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return inst, db, ctx
}

func checkParts(t *testing.T, s *event.Statement) {
	t.Helper()
	if s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
		t.Errorf("parts do not sum to client_us: %+v", s)
	}
}

// A request longer than the server's first read (a 20 MB INSERT, many
// packets): the server starts the statement, and performance_schema its
// timer, before the last request byte arrives. The statement is joined,
// the overlap is request time, and the server's work is exec.
func TestHugeRequestJoined(t *testing.T) {
	inst, db, ctx := fieldServer(t, "CREATE DATABASE f", "CREATE TABLE f.big (id INT PRIMARY KEY, v LONGTEXT) ENGINE=InnoDB")
	payload := strings.Repeat("x", 20<<20)
	got, res := collectStatements(t, ctx, inst, func() error {
		// The pool's connection (the setup's, opened before watch: the
		// capture meets it mid-stream), which goes on after the INSERT:
		// the next statement's row must not take the INSERT's place.
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "/* huge-insert */ INSERT INTO f.big VALUES (1, '"+payload+"')"); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, "DO 1 /* after-huge */")
		return err
	}, "f.big", "do ?")
	var s *event.Statement
	for i := range got {
		if strings.Contains(got[i].SQL, "f.big") {
			s = &got[i]
		}
		if strings.Contains(got[i].SQL, "do ?") && !got[i].Joined {
			t.Errorf("the statement after the INSERT was not joined: %v %v", got[i].Why, got[i].Notes)
		}
	}
	if s == nil || len(got) != 2 {
		t.Fatalf("%d statements reported, want the INSERT and the one after it (notes %v)", len(got), res.Notes)
	}
	t.Logf("joined %v reason %v client %d request %d queue %d exec %d delivery %d req_bytes %d notes %v",
		s.Joined, s.Why, s.ClientUS, s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS, s.ReqBytes, s.Notes)
	if !s.Joined {
		t.Fatalf("the 20 MB INSERT was not joined: %v %v", s.Why, s.Notes)
	}
	checkParts(t, s)
	if s.ReqBytes < 20<<20 {
		t.Errorf("req_bytes %d, want the whole 20 MB request", s.ReqBytes)
	}
	if s.RequestUS < s.TReqLast-s.TReqFirst {
		t.Errorf("request_us %d is less than the request's own transfer (%d µs)", s.RequestUS, s.TReqLast-s.TReqFirst)
	}
	for _, n := range s.Notes {
		// Only the start: a 20 MB statement's server end can trail the OK
		// packet on the wire by a few hundred µs on a loaded host (the
		// server frees the request after answering), which the join notes
		// as it should (-248 µs against 239 allowed, once in four runs).
		if strings.Contains(n, "server start moved") {
			t.Errorf("a server start inside the request's transfer is expected, not a clock error: %q", n)
		}
	}
}

// A client that sends its request slowly (a 2 MB INSERT written in
// pieces with pauses): the wait for the rest of the request is request
// time, not the server's work.
func TestSlowSenderJoined(t *testing.T) {
	inst, _, ctx := fieldServer(t, "CREATE DATABASE f", "CREATE TABLE f.big (id INT PRIMARY KEY, v LONGTEXT)")
	const pause = 100 * time.Millisecond
	got, _ := collectStatements(t, ctx, inst, func() error {
		return slowInsert(ctx, inst, 2<<20, 8, pause)
	}, "f.big") // comments are not part of the reported text
	if len(got) != 1 {
		t.Fatalf("%d slow-sender INSERTs reported, want 1", len(got))
	}
	s := got[0]
	t.Logf("joined %v client %d request %d queue %d exec %d delivery %d", s.Joined, s.ClientUS, s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS)
	if !s.Joined {
		t.Fatalf("the slowly sent INSERT was not joined: %v %v", s.Why, s.Notes)
	}
	checkParts(t, &s)
	if s.RequestUS < (7 * pause).Microseconds() {
		t.Errorf("request_us %d: the 7 pauses of %v inside the request are the client's", s.RequestUS, pause)
	}
	if s.ExecUS > s.ClientUS/2 {
		t.Errorf("exec_us %d of %d: the wait for the request's bytes is not the server's work", s.ExecUS, s.ClientUS)
	}
}

// slowInsert sends one INSERT of about n bytes through a connection whose
// writes of over a megabyte go out in pieces with pause between them (a
// client that dawdles while sending: no driver does it on purpose).
func slowInsert(ctx context.Context, inst *sandbox.Instance, n, pieces int, pause time.Duration) error {
	mysql.RegisterDialContext("slowtcp", func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &slowWriter{Conn: c, pieces: pieces, pause: pause}, nil
	})
	db, err := sql.Open("mysql", strings.Replace(inst.DSN(""), "@tcp(", "@slowtcp(", 1))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "/* slow-sender */ INSERT INTO f.big VALUES (1, '"+strings.Repeat("y", n)+"')")
	return err
}

type slowWriter struct {
	net.Conn
	pieces int
	pause  time.Duration
}

func (w *slowWriter) Write(b []byte) (int, error) {
	if len(b) < 1<<20 {
		return w.Conn.Write(b)
	}
	step := (len(b) + w.pieces - 1) / w.pieces
	for i := 0; i < len(b); i += step {
		if i > 0 {
			time.Sleep(w.pause)
		}
		if _, err := w.Conn.Write(b[i:min(i+step, len(b))]); err != nil {
			return i, err
		}
	}
	return len(b), nil
}

// One COM_QUERY of two statements (CLIENT_MULTI_STATEMENTS): both server
// rows belong to the request, exec runs from the first's start to the
// last's end, and the event lists both rows; the 100 ms the second
// statement slept is the server's, never delivery.
func TestMultiStatementJoined(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: fieldArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, _ := collectStatements(t, ctx, inst, func() error {
		db, err := sql.Open("mysql", inst.DSN("")+"?multiStatements=true")
		if err != nil {
			return err
		}
		defer db.Close()
		for range 3 {
			rows, err := db.QueryContext(ctx, "SELECT 1; SELECT SLEEP(0.1)")
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			for rows.NextResultSet() {
				for rows.Next() {
				}
			}
			if err := rows.Close(); err != nil {
				return err
			}
		}
		return nil
	}, "sleep")
	if len(got) != 3 {
		t.Fatalf("%d multi-statement requests reported, want 3", len(got))
	}
	for _, s := range got {
		t.Logf("joined %v why %v client %d request %d queue %d exec %d stall %d delivery %d statements %d", s.Joined, s.Why,
			s.ClientUS, s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS, len(s.Statements))
		if !s.Joined {
			t.Errorf("not joined: %v %v", s.Why, s.Notes)
			continue
		}
		checkParts(t, &s)
		if s.ExecUS < 95_000 || s.DeliveryUS > 5_000 {
			t.Errorf("exec %d µs, delivery %d µs: the second statement's 100 ms is the server's", s.ExecUS, s.DeliveryUS)
		}
		if len(s.Statements) != 2 || s.Statements[1].ServerUS < 95_000 {
			t.Errorf("the event lists %d server statements (%+v), want both, the second of 100 ms", len(s.Statements), s.Statements)
		}
	}
}

// Clients of the server's unix socket are on no wire: their statements
// are reported as server-only events with the reason, ranked by server
// time beside the wire's profile, and counted in the coverage, whether
// their connection lives across reads (its thread names the socket) or
// ends before watch reads its rows (as the mariadb CLI's do).
func TestSocketClientsReported(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: fieldArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, res := collectStatements(t, ctx, inst, func() error {
		long, err := sql.Open("mysql", inst.SocketDSN(""))
		if err != nil {
			return err
		}
		defer long.Close()
		conn, err := long.Conn(ctx) // one connection across reads
		if err != nil {
			return err
		}
		defer conn.Close()
		for range 3 {
			if _, err := conn.ExecContext(ctx, "DO SLEEP(0.15)"); err != nil {
				return err
			}
			time.Sleep(300 * time.Millisecond)
		}
		for range 3 { // short connections, each ended within its statement's read
			short, err := sql.Open("mysql", inst.SocketDSN(""))
			if err != nil {
				return err
			}
			_, err = short.ExecContext(ctx, "SELECT SLEEP(0.15)")
			short.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}, "sleep", "SLEEP")
	var long, short int
	for _, s := range got {
		t.Logf("%q why %v server %d µs joined %v", s.SQL, s.Why, s.ServerUS, s.Joined)
		if s.Joined || !s.Why.ServerOnly() || s.ServerUS < 140_000 || s.ClientUS != 0 {
			t.Errorf("a socket client's statement: %+v", s)
		}
		switch {
		case strings.HasPrefix(strings.ToUpper(s.SQL), "DO"):
			long++
			if s.Why != event.UnixSocket {
				t.Errorf("a live socket connection's statement says %v, want unix_socket", s.Why)
			}
		default:
			short++
		}
	}
	if long != 3 || short != 3 {
		t.Errorf("socket statements reported: %d of the long connection's 3, %d of the short ones' 3 (coverage %+v)", long, short, res.Coverage)
	}
	if res.Coverage.NotOnWire < 6 || res.NotOnWire == nil || len(res.NotOnWire.Digests) == 0 {
		t.Errorf("coverage not on wire %d, profile %v", res.Coverage.NotOnWire, res.NotOnWire)
	}
	for _, d := range res.Profile.Digests {
		if strings.Contains(strings.ToUpper(d.DigestText), "SLEEP") {
			t.Errorf("a socket statement in the wire's client-latency profile: %+v", d)
		}
	}
}

// Connection-per-request clients (PHP's way): 300 connections, each
// connect, three point selects, close, three at a time. Nearly every
// statement joins, including those of threads that ended before a read
// named their connection, and every unjoined statement's reason is the
// one the coverage counts.
func TestConnectionChurnJoined(t *testing.T) {
	inst, _, ctx := fieldServer(t, churnSetup...)
	c := runChurn(t, ctx, inst, 300, 0)
	// Three connections at a time run the same point select: their ended
	// threads are told apart by the id offset of their range, by the
	// connections the others took, and by their literals.
	if c.fastJoined*1000 < c.fast*995 {
		t.Errorf("joined %d of %d (%.1f%%), want at least 99.5%%", c.fastJoined, c.fast, 100*float64(c.fastJoined)/float64(c.fast))
	}
}

// The same churn on a server whose events_statements_history_long has its
// default size (MariaDB: 1,000 rows), which ~1,500 statements a second turn
// over in well under a second: the poller reads the ring before it turns
// over, so nearly every fast statement joins, and every slow one (a
// request in thirty runs a 50 ms statement) does. Counted from the wire's
// statements, whatever the host's speed.
func TestConnectionChurnDefaultRing(t *testing.T) {
	args := slices.DeleteFunc(slices.Clone(fieldArgs), func(a string) bool {
		return strings.HasPrefix(a, "--performance-schema-events-statements-history-long-size=")
	})
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: args})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range churnSetup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var ring int
	if err := db.QueryRowContext(ctx, "SELECT @@performance_schema_events_statements_history_long_size").Scan(&ring); err != nil {
		t.Fatal(err)
	}
	c := runChurn(t, ctx, inst, 300, 30)
	t.Logf("history_long: %d rows; ring lost %d rows in %d polls", ring, c.res.ServerSide.RingLost, c.res.ServerSide.Polls)
	if c.fastJoined*100 < c.fast*99 {
		t.Errorf("joined %d of %d fast statements (%.1f%%), want at least 99%%", c.fastJoined, c.fast, 100*float64(c.fastJoined)/float64(c.fast))
	}
	if c.slowJoined != c.slow {
		t.Errorf("joined %d of %d slow statements, want all", c.slowJoined, c.slow)
	}
}

var churnSetup = []string{"CREATE DATABASE f", "CREATE TABLE f.kv (id INT PRIMARY KEY, v INT)", "INSERT INTO f.kv VALUES (1,1),(2,2),(3,3)"}

// churnOutcome is what watch reported of a churn (runChurn).
type churnOutcome struct {
	fast, fastJoined, slow, slowJoined int
	res                                *Result
}

// runChurn runs conns connections of three point selects each, three at a
// time, under watch at its default flags; one in slowEvery (0: none) runs a
// fourth statement of 50 ms. It checks that watch reported every
// statement, each unjoined one with the reason the coverage counts.
func runChurn(t *testing.T, ctx context.Context, inst *sandbox.Instance, conns, slowEvery int) churnOutcome {
	t.Helper()
	const each = 3
	slow := 0
	if slowEvery > 0 {
		slow = conns / slowEvery
	}
	got, res := collectStatements(t, ctx, inst, func() error {
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range conns / 3 {
					c, err := sql.Open("mysql", inst.DSN(""))
					if err != nil {
						errs <- err
						return
					}
					qs := make([]string, 0, each+1)
					for k := range each {
						qs = append(qs, fmt.Sprintf("SELECT v FROM f.kv WHERE id = %d", 1+(w+k)%3))
					}
					if n := i*3 + w; slowEvery > 0 && n%slowEvery == 0 {
						qs = append(qs, "SELECT v + SLEEP(0.05) FROM f.kv WHERE id = 1")
					}
					for _, q := range qs {
						var v int
						if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
							c.Close()
							errs <- err
							return
						}
					}
					c.Close()
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}, "f.kv")
	out := churnOutcome{res: res}
	byReason := map[string]int64{}
	for _, s := range got {
		isSlow := strings.Contains(strings.ToUpper(s.SQL+s.DigestText), "SLEEP")
		if isSlow {
			out.slow++
		} else {
			out.fast++
		}
		if s.Joined {
			if isSlow {
				out.slowJoined++
			} else {
				out.fastJoined++
			}
			continue
		}
		byReason[s.Why.String()]++
	}
	t.Logf("%d of %d fast and %d of %d slow statements joined; unjoined by reason %v; coverage %v, server background %d; join %+v; watch's CPU %.2f s, %d polls, %d thread reads",
		out.fastJoined, out.fast, out.slowJoined, out.slow, byReason, res.Coverage.Unjoined, res.Coverage.ServerBackground, res.Join, res.Own.CPUSeconds, res.ServerSide.Polls, res.ServerSide.ThreadReads)
	if out.fast != conns*each || out.slow != slow {
		t.Fatalf("%d point selects and %d slow statements reported, want %d and %d", out.fast, out.slow, conns*each, slow)
	}
	for r, n := range byReason {
		if res.Coverage.Unjoined[r] < n {
			t.Errorf("reason %s: %d events, the coverage counts %d", r, n, res.Coverage.Unjoined[r])
		}
	}
	return out
}
