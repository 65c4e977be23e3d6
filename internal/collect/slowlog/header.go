package slowlog

import (
	"bytes"
	"time"
)

// Header line prefixes that start an event.
var (
	prefixTime     = []byte("# Time:")
	prefixUserHost = []byte("# User@Host:")
	prefixQTime    = []byte("# Query_time:")
	prefixAdmin    = []byte("# administrator command:")
	prefixExplain  = []byte("# explain:")
)

// userHost is the last "# User@Host:" line parsed: consecutive events
// often repeat it byte for byte, and then the split is reused.
type userHost struct {
	line, user, host, ip []byte
	connID               uint64
	hasID, valid         bool
	bad                  int64 // unreadable parts, counted per use
}

// parseUserHost reads "user[priv] @ host [ip]  Id: 5" (the part after
// "# User@Host:"). The first name is the user the privileges were checked
// as; the bracketed one is used when the first is empty.
func (p *Parser) parseUserHost(e *Event, rest []byte) {
	e.hasUserHost = true
	c := &p.uh
	if !c.valid || !bytes.Equal(rest, c.line) {
		c.split(rest)
	}
	p.stats.BadValues += c.bad
	e.User = append(e.User[:0], c.user...)
	e.Host = append(e.Host[:0], c.host...)
	e.IP = append(e.IP[:0], c.ip...)
	if c.hasID {
		e.ConnID = c.connID
	}
}

func (c *userHost) split(rest []byte) {
	c.line, c.valid = append(c.line[:0], rest...), true
	c.user, c.host, c.ip, c.connID, c.hasID, c.bad = c.user[:0], c.host[:0], c.ip[:0], 0, false, 0
	at := bytes.Index(rest, []byte(" @ "))
	if at < 0 {
		c.bad = 1
		return
	}
	who, where := bytes.TrimSpace(rest[:at]), rest[at+3:]
	name, inner := splitBracket(who)
	if len(name) == 0 {
		name = inner
	}
	c.user = append(c.user, name...)
	if id := bytes.Index(where, []byte("Id:")); id >= 0 {
		if v, ok := parseUint(bytes.TrimSpace(where[id+3:])); ok {
			c.connID, c.hasID = v, true
		} else {
			c.bad = 1
		}
		where = where[:id]
	}
	host, ip := splitBracket(bytes.TrimSpace(where))
	c.host = append(c.host, host...)
	c.ip = append(c.ip, ip...)
}

// splitBracket splits "name [inner]" or "name[inner]" into its two parts.
func splitBracket(b []byte) (name, inner []byte) {
	open := bytes.IndexByte(b, '[')
	if open < 0 {
		return bytes.TrimSpace(b), nil
	}
	name = bytes.TrimSpace(b[:open])
	inner = b[open+1:]
	if end := bytes.IndexByte(inner, ']'); end >= 0 {
		inner = inner[:end]
	}
	return name, bytes.TrimSpace(inner)
}

// parseFields reads "Key: value  Key: value" pairs of any header line in
// one forward pass. A key directly followed by another key has an empty
// value ("Schema:  QC_hit:"); words without a colon are skipped; colons
// inside a value (ISO times) stay in the value.
func (p *Parser) parseFields(e *Event, b []byte) {
	i := 0
	for i < len(b) {
		i = skipBlanks(b, i)
		k := i
		for i < len(b) && b[i] != ':' && b[i] != ' ' && b[i] != '\t' {
			i++
		}
		if i >= len(b) || b[i] != ':' {
			continue
		}
		key := b[k:i]
		i = skipBlanks(b, i+1)
		v := i
		for i < len(b) && b[i] != ' ' && b[i] != '\t' {
			i++
		}
		val := b[v:i]
		if len(val) > 0 && val[len(val)-1] == ':' {
			val, i = nil, v // that is the next key: this one is empty
		}
		if len(key) > 0 {
			p.setField(e, key, val)
		}
	}
}

func skipBlanks(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// setField stores one known field; unknown fields are ignored, so new
// server versions' additions do not disturb parsing.
func (p *Parser) setField(e *Event, key, val []byte) {
	switch string(key) {
	case "Query_time":
		if us, ok := parseSeconds(val); ok {
			e.QueryTimeUS, e.HasQueryTime = us, true
		} else {
			e.badQueryTime = true
			p.stats.BadValues++
		}
	case "Lock_time":
		e.LockTimeUS, e.HasLockTime = p.seconds(val), true
	case "Rows_sent":
		e.RowsSent = p.int(val)
	case "Rows_examined":
		e.RowsExamined, e.HasRowsExamined = p.int(val), true
	case "Rows_affected":
		e.RowsAffected = p.int(val)
	case "Thread_id", "Id":
		e.ConnID = uint64(p.int(val))
	case "Schema":
		e.Schema = append(e.Schema[:0], val...)
	case "Errno", "Last_errno":
		e.Errno, e.HasErrno = int(p.int(val)), true
	case "Killed":
		e.Killed = int(p.int(val))
	case "Bytes_sent":
		e.BytesSent = p.int(val)
	case "Bytes_received":
		e.BytesRecv, e.HasBytesRecv = p.int(val), true
	case "Start":
		e.StartUS = p.isoTime(val)
	case "End":
		e.EndUS = p.isoTime(val)
	default:
		p.setPlanField(e, key, val)
	}
}

// setPlanField stores query-plan and InnoDB fields (MariaDB
// log_slow_verbosity, Percona log_slow_verbosity=full).
func (p *Parser) setPlanField(e *Event, key, val []byte) {
	switch string(key) {
	case "QC_hit", "QC_Hit":
		// MariaDB writes it on every event, plan or not: not a plan field.
		e.QCHit = yes(val)
	case "Log_slow_rate_limit":
		e.RateLimit = p.int(val)
	default:
		if p.setEngineField(e, key, val) || p.setQueryPlanField(e, key, val) {
			e.HasPlan = true
		}
	}
}

func (p *Parser) setQueryPlanField(e *Event, key, val []byte) bool {
	switch string(key) {
	case "Tmp_tables":
		e.TmpTables = p.int(val)
	case "Tmp_disk_tables":
		e.TmpDiskTables = p.int(val)
	case "Full_scan":
		e.FullScan = yes(val)
	case "Full_join":
		e.FullJoin = yes(val)
	case "Tmp_table":
		e.TmpTable = yes(val)
	case "Tmp_table_on_disk":
		e.TmpTableOnDisk = yes(val)
	case "Filesort":
		e.Filesort = yes(val)
	case "Filesort_on_disk":
		e.FilesortOnDisk = yes(val)
	case "Merge_passes":
		e.MergePasses = p.int(val)
	default:
		return false
	}
	return true
}

// setEngineField stores the storage engine's fields: Percona Server's
// InnoDB_* (waits in seconds, "InnoDB_rec_lock_wait: 0.899000") and
// MariaDB's log_slow_verbosity=engine ones, whose times are milliseconds
// ("Pages_read_time: 7.9842  Engine_time: 13.6001"). A field read marks
// its bit in EngineFields; an unreadable value is counted and leaves its
// field unknown.
func (p *Parser) setEngineField(e *Event, key, val []byte) bool {
	const (
		count = iota
		seconds
		millis
	)
	var (
		dst  *int64
		bit  uint16
		unit = count
	)
	switch string(key) {
	case "InnoDB_IO_r_ops":
		dst, bit = &e.InnoDBIOReadOps, EngineIOReadOps
	case "InnoDB_IO_r_bytes":
		dst, bit = &e.InnoDBIOReadBytes, EngineIOReadBytes
	case "InnoDB_IO_r_wait":
		dst, bit, unit = &e.InnoDBIOReadWaitUS, EngineIOReadWait, seconds
	case "InnoDB_rec_lock_wait":
		dst, bit, unit = &e.InnoDBRecLockWaitUS, EngineRecLockWait, seconds
	case "InnoDB_queue_wait":
		dst, bit, unit = &e.InnoDBQueueWaitUS, EngineQueueWait, seconds
	case "InnoDB_pages_distinct":
		dst, bit = &e.InnoDBPagesDistinct, EnginePagesDistinct
	case "Pages_accessed":
		dst, bit = &e.PagesAccessed, EnginePagesAccessed
	case "Pages_read":
		dst, bit = &e.PagesRead, EnginePagesRead
	case "Pages_prefetched":
		dst, bit = &e.PagesPrefetched, EnginePagesPrefetched
	case "Pages_updated":
		dst, bit = &e.PagesUpdated, EnginePagesUpdated
	case "Old_rows_read":
		dst, bit = &e.OldRowsRead, EngineOldRowsRead
	case "Pages_read_time":
		dst, bit, unit = &e.PagesReadTimeUS, EnginePagesReadTime, millis
	case "Engine_time":
		dst, bit, unit = &e.EngineTimeUS, EngineTime, millis
	default:
		return false
	}
	var v int64
	var ok bool
	switch unit {
	case count:
		var u uint64
		u, ok = parseUint(val)
		ok = ok && u <= 1<<62
		v = int64(u)
	case seconds:
		v, ok = parseSeconds(val)
	case millis:
		// Read as seconds it is exact to 1e-6 ms: round to whole µs.
		v, ok = parseSeconds(val)
		v = (v + 500) / 1000
	}
	if !ok {
		p.stats.BadValues++
		return true
	}
	*dst = v
	e.EngineFields |= bit
	return true
}

func yes(b []byte) bool { return len(b) > 0 && (b[0] == 'Y' || b[0] == 'y') }

// int parses a non-negative decimal field, counting bad ones.
func (p *Parser) int(b []byte) int64 {
	v, ok := parseUint(b)
	if !ok || v > 1<<62 {
		p.stats.BadValues++
		return 0
	}
	return int64(v)
}

// seconds parses a "0.000123" field into microseconds, counting bad ones.
func (p *Parser) seconds(b []byte) int64 {
	us, ok := parseSeconds(b)
	if !ok {
		p.stats.BadValues++
	}
	return us
}

func (p *Parser) isoTime(b []byte) int64 {
	t, ok := parseTime(b, p.loc)
	if !ok {
		p.stats.BadValues++
		return 0
	}
	return t.us
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// parseSeconds reads "S[.ffffff...]" exactly into microseconds, rounding
// half up on the seventh fraction digit.
func parseSeconds(b []byte) (int64, bool) {
	dot := bytes.IndexByte(b, '.')
	whole, frac := b, []byte(nil)
	if dot >= 0 {
		whole, frac = b[:dot], b[dot+1:]
	}
	s, ok := parseUint(whole)
	if !ok || s > 1<<40 || (dot >= 0 && len(frac) == 0) {
		return 0, false
	}
	var us int64
	for i := 0; i < 6; i++ {
		us *= 10
		if i < len(frac) {
			if frac[i] < '0' || frac[i] > '9' {
				return 0, false
			}
			us += int64(frac[i] - '0')
		}
	}
	for i := 6; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return 0, false
		}
	}
	if len(frac) > 6 && frac[6] >= '5' {
		us++
	}
	return int64(s)*1_000_000 + us, true
}

// parsedTime is a "# Time:" value.
type parsedTime struct {
	us       int64
	fraction bool // had sub-second digits
	zoned    bool // had "Z" or an offset
	ok       bool
}

// parseTime reads "2024-01-02T03:04:05.123456Z" (also with an offset, a
// space instead of "T", or no zone) and "231122  9:05:01" (YYMMDD). Times
// without a zone are in loc.
func parseTime(b []byte, loc *time.Location) (parsedTime, bool) {
	b = bytes.TrimSpace(b)
	if len(b) >= 10 && b[4] == '-' {
		return parseISO(b, loc)
	}
	return parseYYMMDD(b, loc)
}

func parseISO(b []byte, loc *time.Location) (parsedTime, bool) {
	if len(b) < 19 || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return parsedTime{}, false
	}
	y, ok1 := digits(b[0:4])
	mo, ok2 := digits(b[5:7])
	d, ok3 := digits(b[8:10])
	h, ok4 := digits(b[11:13])
	mi, ok5 := digits(b[14:16])
	s, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return parsedTime{}, false
	}
	frac, n, rest := fraction(b[19:])
	pt := parsedTime{fraction: n > 0, ok: true}
	zone, zoned, ok := parseZone(rest)
	if !ok {
		return parsedTime{}, false
	}
	return pt.finish(y, mo, d, h, mi, s, frac, zone, zoned, loc)
}

func parseYYMMDD(b []byte, loc *time.Location) (parsedTime, bool) {
	if len(b) < 6 {
		return parsedTime{}, false
	}
	y, ok1 := digits(b[0:2])
	mo, ok2 := digits(b[2:4])
	d, ok3 := digits(b[4:6])
	clock := bytes.TrimLeft(b[6:], " ")
	colon := bytes.IndexByte(clock, ':')
	if !(ok1 && ok2 && ok3) || colon < 1 || colon > 2 || len(clock) < colon+6 || clock[colon+3] != ':' {
		return parsedTime{}, false
	}
	h, ok4 := digits(clock[:colon])
	mi, ok5 := digits(clock[colon+1 : colon+3])
	s, ok6 := digits(clock[colon+4 : colon+6])
	if !(ok4 && ok5 && ok6) {
		return parsedTime{}, false
	}
	frac, n, rest := fraction(clock[colon+6:])
	if len(bytes.TrimSpace(rest)) != 0 {
		return parsedTime{}, false
	}
	pt := parsedTime{fraction: n > 0, ok: true}
	return pt.finish(2000+y, mo, d, h, mi, s, frac, 0, false, loc)
}

func (pt parsedTime) finish(y, mo, d, h, mi, s, frac, zoneSec int, zoned bool, loc *time.Location) (parsedTime, bool) {
	if mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
		return parsedTime{}, false
	}
	if zoned {
		pt.zoned = true
		t := time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC)
		pt.us = (t.Unix()-int64(zoneSec))*1_000_000 + int64(frac)
		return pt, true
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, 0, loc)
	pt.us = t.Unix()*1_000_000 + int64(frac)
	return pt, true
}

// fraction reads ".ffffff" into microseconds; n is the digits read.
func fraction(b []byte) (us, n int, rest []byte) {
	if len(b) == 0 || b[0] != '.' {
		return 0, 0, b
	}
	i := 1
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i <= 6 {
			us = us*10 + int(b[i]-'0')
		}
		i++
	}
	n = i - 1
	for k := n; k < 6; k++ {
		us *= 10
	}
	return us, n, b[i:]
}

// parseZone reads "", "Z" or "+hh:mm"/"-hh:mm" into seconds east of UTC.
func parseZone(b []byte) (sec int, zoned, ok bool) {
	switch {
	case len(b) == 0:
		return 0, false, true
	case len(b) == 1 && b[0] == 'Z':
		return 0, true, true
	case len(b) == 6 && (b[0] == '+' || b[0] == '-') && b[3] == ':':
		h, ok1 := digits(b[1:3])
		m, ok2 := digits(b[4:6])
		if !ok1 || !ok2 {
			return 0, false, false
		}
		sec = h*3600 + m*60
		if b[0] == '-' {
			sec = -sec
		}
		return sec, true, true
	}
	return 0, false, false
}

func digits(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, len(b) > 0
}
