package slowlog

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// Options configure a Parser.
type Options struct {
	// MaxLineBytes bounds one line and one statement's text; longer ones are
	// cut (see the package doc). DefaultMaxLineBytes when zero.
	MaxLineBytes int
	// Location is the zone of "# Time:" values written without one
	// (YYMMDD lines); time.Local when nil.
	Location *time.Location
}

// Stats counts what the parser read, emitted and dropped (see the package
// doc for the malformed-event policy behind each count).
type Stats struct {
	Bytes          int64 `json:"bytes"` // of (decompressed) log text
	Lines          int64 `json:"lines"`
	Events         int64 `json:"events"`         // emitted
	AdminCommands  int64 `json:"admin_commands"` // of Events
	HeaderOnly     int64 `json:"header_only"`    // dropped: header, no statement
	Orphans        int64 `json:"orphans"`        // dropped: statement text, no Query_time
	Malformed      int64 `json:"malformed"`      // dropped: unreadable Query_time
	BadValues      int64 `json:"bad_values"`     // header values ignored
	TruncatedLines int64 `json:"truncated_lines"`
	Restarts       int64 `json:"restarts"` // banners after the first line: a restart or FLUSH SLOW LOGS
}

// Dropped is the number of events the parser saw but did not emit.
func (s Stats) Dropped() int64 { return s.HeaderOnly + s.Orphans + s.Malformed }

// Parser reads slow-log events one at a time. It is not safe for
// concurrent use.
type Parser struct {
	lr  *lineReader
	loc *time.Location
	max int
	ev  *Event // the event being filled
	own Event  // the one Next fills

	// pending is a line that ended the previous event and starts the next;
	// it stays valid because nothing is read until Next is called again.
	pending    []byte
	pendingCut bool
	hasPending bool

	uh          userHost
	bannerLines int    // banner follow-up lines still allowed
	curDB       []byte // database from the last "use db;" line
	lastTime    parsedTime
	stats       Stats
	err         error
}

// NewParser returns a parser reading plain slow-log text from r (see
// Decompress or Open for gzip).
func NewParser(r io.Reader, opts Options) *Parser {
	loc := opts.Location
	if loc == nil {
		loc = time.Local
	}
	lr := newLineReader(r, opts.MaxLineBytes)
	return &Parser{lr: lr, loc: loc, max: lr.max}
}

// Stats returns the counts so far.
func (p *Parser) Stats() Stats {
	s := p.stats
	s.Bytes, s.Lines = p.lr.offset, p.lr.lineNo
	return s
}

// Next returns the next complete event, valid until the next call, or
// io.EOF at the end of the input, or a read error (wrapped).
func (p *Parser) Next() (*Event, error) {
	if err := p.NextInto(&p.own); err != nil {
		return nil, err
	}
	return &p.own, nil
}

// NextInto fills e with the next complete event, reusing e's buffers; e
// does not depend on the parser afterwards, so events can be handed to
// another goroutine. It returns io.EOF at the end of the input.
func (p *Parser) NextInto(e *Event) error {
	if p.err != nil {
		return p.err
	}
	p.ev = e
	e.reset()
	if p.hasPending {
		p.hasPending = false
		p.line(p.pending, p.pendingCut)
	}
	for {
		line, cut, err := p.lr.next()
		if err != nil {
			return p.end(err)
		}
		if e.started() && p.isBoundary(line) {
			if p.finish() {
				p.pending, p.pendingCut, p.hasPending = line, cut, true
				return nil
			}
			e.reset()
		}
		p.line(line, cut)
	}
}

// end finishes the last event at the end of the input (io.EOF or
// ErrInterrupted, returned on the next call), or returns a read error.
func (p *Parser) end(err error) error {
	if !endOfInput(err) {
		p.err = fmt.Errorf("reading slow log after line %d: %w", p.lr.lineNo, err)
		return p.err
	}
	if p.finish() {
		return nil
	}
	p.err = err
	return err
}

// stage orders an event's parts: a line of a stage at or before the
// current one starts a new event.
const (
	stageNone = iota - 1
	stageTime
	stageUserHost
	stageQueryTime
	stageBody
)

func (e *Event) stage() int {
	switch {
	case e.inQuery || e.hasSet || e.hasUse:
		return stageBody
	case e.HasQueryTime || e.badQueryTime:
		return stageQueryTime
	case e.hasUserHost:
		return stageUserHost
	case e.hasTime:
		return stageTime
	}
	return stageNone
}

// isBoundary reports whether line starts a new event given what the
// current event has seen.
func (p *Parser) isBoundary(line []byte) bool {
	switch {
	case len(line) == 0:
		return false
	case line[0] == '#':
		if p.ev.HasQueryTime && p.ev.inQuery && !p.ev.semicolon {
			// The server ends every statement with ";": this "#" line is
			// inside a multi-line string or comment of the statement.
			return false
		}
		st := p.ev.stage()
		return bytes.HasPrefix(line, prefixTime) && st >= stageTime ||
			bytes.HasPrefix(line, prefixUserHost) && st >= stageUserHost ||
			bytes.HasPrefix(line, prefixQTime) && st >= stageQueryTime
	default:
		return isBanner(line)
	}
}

// isBanner recognises the first line the server writes when it opens the
// log: "/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-log (Debian). started with:".
func isBanner(line []byte) bool {
	return bytes.HasSuffix(line, []byte("started with:")) && bytes.Contains(line, []byte(", Version: "))
}

// isBannerFollow recognises the banner's "Tcp port: ..." and
// "Time  Id Command  Argument" lines.
func isBannerFollow(line []byte) bool {
	return bytes.HasPrefix(line, []byte("Tcp port:")) ||
		bytes.HasPrefix(line, []byte("Time")) && bytes.Contains(line, []byte("Id Command"))
}

// line consumes one line that does not end the current event.
func (p *Parser) line(line []byte, cut bool) {
	if p.bannerLines > 0 {
		p.bannerLines--
		if isBannerFollow(line) {
			return
		}
		p.bannerLines = 0
	}
	defer p.markLine()
	switch {
	case isBanner(line) && !p.ev.inQuery:
		if p.lr.lineNo > 1 { // the first line is the server opening a new log
			p.stats.Restarts++
		}
		p.bannerLines = 2
	case p.ev.inQuery:
		p.appendQuery(line, cut)
	case len(line) > 0 && line[0] == '#':
		p.header(line)
	case len(bytes.TrimSpace(line)) == 0:
		// blank lines between events carry nothing
	case p.meta(line):
	default:
		p.appendQuery(line, cut)
	}
}

// markLine records where the current event starts.
func (p *Parser) markLine() {
	if p.ev.Line == 0 && p.ev.started() {
		p.ev.Line = p.lr.lineNo
	}
}

func (p *Parser) header(line []byte) {
	e := p.ev
	switch {
	case bytes.HasPrefix(line, prefixTime):
		p.timeLine(line[len(prefixTime):])
	case bytes.HasPrefix(line, prefixUserHost):
		p.parseUserHost(e, line[len(prefixUserHost):])
	case bytes.HasPrefix(line, prefixAdmin):
		p.adminLine(line)
	case bytes.HasPrefix(line, prefixExplain):
		e.ExplainLines++
	default:
		p.parseFields(e, line[1:])
	}
}

func (p *Parser) timeLine(v []byte) {
	t, ok := parseTime(v, p.loc)
	if !ok {
		p.stats.BadValues++
		return
	}
	p.lastTime = t
	e := p.ev
	e.hasTime, e.timeThisEvent, e.timeHasFraction = true, t.us, t.fraction
}

// adminLine handles "# administrator command: Quit;", which stands where
// the statement would.
func (p *Parser) adminLine(line []byte) {
	e := p.ev
	if !e.HasQueryTime {
		e.inQuery = true // counted as an orphan at finish
		return
	}
	name := bytes.TrimSpace(line[len(prefixAdmin):])
	e.terminated = bytes.HasSuffix(name, []byte(";"))
	name = bytes.TrimSuffix(name, []byte(";"))
	e.Admin, e.inQuery, e.semicolon = true, true, true
	e.AdminCommand = append(e.AdminCommand[:0], name...)
	e.Query = append(append(e.Query[:0], "administrator command: "...), name...)
}

// meta consumes the server's "use db;" and "SET timestamp=N;" lines that
// come before the statement, at most one of each per event.
func (p *Parser) meta(line []byte) bool {
	e := p.ev
	if !e.hasUse && !e.hasSet && bytes.HasPrefix(line, []byte("use ")) && bytes.HasSuffix(line, []byte(";")) {
		db := bytes.TrimSpace(line[4 : len(line)-1])
		db = bytes.TrimSuffix(bytes.TrimPrefix(db, []byte("`")), []byte("`"))
		p.curDB = append(p.curDB[:0], db...)
		e.hasUse = true
		return true
	}
	if !e.hasSet && bytes.HasPrefix(line, []byte("SET ")) {
		if ts, ok := parseSetLine(line[4:]); ok {
			e.hasSet, e.SetTimestamp = true, ts
			return true
		}
	}
	return false
}

// parseSetLine reads "last_insert_id=1,insert_id=2,timestamp=N;" as the
// server writes it; anything else is a user's SET statement.
func parseSetLine(b []byte) (ts int64, ok bool) {
	if !bytes.HasSuffix(b, []byte(";")) {
		return 0, false
	}
	b = b[:len(b)-1]
	seen := false
	for len(b) > 0 {
		item := b
		if i := bytes.IndexByte(b, ','); i >= 0 {
			item, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		eq := bytes.IndexByte(item, '=')
		if eq < 0 {
			return 0, false
		}
		v, vok := parseUint(item[eq+1:])
		if !vok {
			return 0, false
		}
		switch string(item[:eq]) {
		case "timestamp":
			ts, seen = int64(v), true
		case "last_insert_id", "insert_id":
		default:
			return 0, false
		}
	}
	return ts, seen
}

// appendQuery adds one line of statement text, bounded by max. Text with
// no Query_time before it is not kept: it will be dropped as an orphan.
func (p *Parser) appendQuery(line []byte, cut bool) {
	e := p.ev
	e.inQuery = true
	if !e.HasQueryTime {
		return
	}
	if cut {
		p.markTruncated()
	}
	room := p.max - len(e.Query)
	if len(e.Query) > 0 {
		if room <= 0 {
			p.markTruncated()
			e.semicolon = true
			return
		}
		e.Query = append(e.Query, '\n')
		room--
	}
	if len(line) > room {
		line = line[:room]
		p.markTruncated()
	}
	// A cut line lost its end: let the next header end the statement.
	e.semicolon = cut || endsStatement(line)
	if len(e.Query) == 0 && len(line) > 0 && len(p.lr.long) > 0 && &line[0] == &p.lr.long[0] {
		e.Query = p.lr.takeLong()[:len(line)] // hold a huge line once, not twice
		return
	}
	e.Query = append(e.Query, line...)
}

// endsStatement reports whether a statement line ends with ";" (trailing
// blanks aside).
func endsStatement(line []byte) bool {
	line = trimRightSpace(line)
	return len(line) > 0 && line[len(line)-1] == ';'
}

// trimRightSpace is bytes.TrimRight for ASCII blanks without its cutset
// setup, which shows on the hot path.
func trimRightSpace(b []byte) []byte {
	n := len(b)
	for n > 0 && (b[n-1] == ' ' || b[n-1] == '\t' || b[n-1] == '\r' || b[n-1] == '\n') {
		n--
	}
	return b[:n]
}

func (p *Parser) markTruncated() {
	if !p.ev.Truncated {
		p.ev.Truncated = true
		p.stats.TruncatedLines++
	}
}

// finish decides the fate of the current event: true when it is emitted.
func (p *Parser) finish() bool {
	e := p.ev
	switch {
	case !e.started():
		return false
	case e.complete():
		p.complete()
		return true
	case e.badQueryTime:
		p.stats.Malformed++
	case e.inQuery:
		p.stats.Orphans++
	default:
		p.stats.HeaderOnly++
	}
	return false
}

// complete fills the derived fields of an event about to be emitted.
func (p *Parser) complete() {
	e := p.ev
	p.stats.Events++
	if e.Admin {
		p.stats.AdminCommands++
	} else {
		e.Query = trimRightSpace(e.Query)
		e.terminated = bytes.HasSuffix(e.Query, []byte(";"))
		e.Query = bytes.TrimSuffix(e.Query, []byte(";"))
	}
	if !e.terminated {
		e.Notes = append(e.Notes, NoteUnterminated)
	}
	if e.Truncated {
		e.Notes = append(e.Notes, NoteTruncated)
	}
	if len(e.Schema) == 0 {
		e.Schema = append(e.Schema, p.curDB...)
	}
	if p.lastTime.ok {
		e.TimeUS = p.lastTime.us
	}
	p.startTime()
}

func (p *Parser) startTime() {
	e := p.ev
	switch {
	case e.StartUS != 0:
	case e.hasTime && e.timeHasFraction:
		e.StartUS = e.timeThisEvent - e.QueryTimeUS
	case e.hasSet:
		e.StartUS = e.SetTimestamp * 1_000_000
	case p.lastTime.ok:
		e.StartUS = p.lastTime.us - e.QueryTimeUS
		e.Notes = append(e.Notes, NoteStartFromTime)
	default:
		e.Notes = append(e.Notes, NoteStartUnknown)
	}
	if e.EndUS == 0 && e.StartUS != 0 {
		e.EndUS = e.StartUS + e.QueryTimeUS
	}
}
