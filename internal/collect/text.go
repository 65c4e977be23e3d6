package collect

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TextCut says how much of a statement's text a row's SQLText holds.
type TextCut uint8

const (
	// TextWhole: the text as the client sent it (the server trims white
	// space around it), or a text no read could tell was cut.
	TextWhole TextCut = iota
	// TextCutByServer: performance_schema kept only the text's first
	// performance_schema_max_sql_text_length bytes (1,024 by default) and
	// marked the cut with "..." (MariaDB 10.11 measured: a 64-byte limit
	// gives 61 bytes and "...", fewer when a character straddles the cut).
	TextCutByServer
	// TextCutByRead: the read took the text's start only (a join cursor's
	// LEFT(SQL_TEXT, joinTextPrefix)), and its whole text could not be
	// read again: the row had left the table.
	TextCutByRead
)

// HoldsWholeText reports whether r's SQLText is surely the statement's
// whole text: not marked cut, shorter than any read's prefix and than the
// server's bound (whose cut ends in the marker). A join may then tell a
// longer text from it, not only another text of its length.
func (r *ServerStatement) HoldsWholeText() bool {
	return r.TextCut == TextWhole && len(r.SQLText) < joinTextPrefix && !strings.HasSuffix(r.SQLText, cutMarker)
}

// maxSQLTextVar bounds the text performance_schema keeps of a statement.
const maxSQLTextVar = "performance_schema_max_sql_text_length"

// defaultMaxSQLText is maxSQLTextVar's default, for a server that does not
// say (MySQL 5.6 had the bound fixed at 1,024).
const defaultMaxSQLText = 1024

// cutMarker is what performance_schema appends to a text it cut.
const cutMarker = "..."

// cutByServer reports whether text, as performance_schema shows it, was
// cut at maxText bytes: it ends in the marker and reaches the bound, less
// the marker and a character the cut could not split.
func cutByServer(text string, maxText int) bool {
	return strings.HasSuffix(text, cutMarker) && len(text) >= maxText-len(cutMarker)-utf8.UTFMax
}

// cutByRead reports whether text may be the first prefix characters of a
// longer one (LEFT(SQL_TEXT, prefix) counts characters).
func cutByRead(text string, prefix int) bool {
	return prefix > 0 && len(text) >= prefix && utf8.RuneCountInString(text) >= prefix
}

// WholeText makes the cursor read SQL_TEXT whole (a join cursor reads
// only its start): every row it returns is then reported with its own
// text, as in a run without the wire.
func (c *StatementCursor) WholeText() {
	if c.r != nil {
		c.r.setPrefix("SQL_TEXT", 0)
	}
}

// setPrefix changes how much of column name the reader reads (0: all).
func (h *historyReader[R]) setPrefix(name string, prefix int) {
	set := func(fs []field[R]) []field[R] {
		out := append([]field[R](nil), fs...) // want may be shared (joinFields)
		for i := range out {
			if out[i].name == name {
				out[i].prefix = prefix
			}
		}
		return out
	}
	h.want = set(h.want)
	if h.ready {
		h.fields = set(h.fields)
		h.query = h.buildQuery()
	}
}

// textPrefix is how many characters of SQL_TEXT the cursor reads (0: all).
func (c *StatementCursor) textPrefix() int {
	fields := c.r.want
	if c.r.ready {
		fields = c.r.fields
	}
	for _, f := range fields {
		if f.name == "SQL_TEXT" {
			return f.prefix
		}
	}
	return 0
}

// completeTexts says of each row whether its text is whole (TextCut). A
// unix-socket client's row is reported with its own text (no wire
// statement brings one), so when the cursor read only the start of it,
// its whole text is read again; other rows' cut texts only go to the
// join, which compares their start.
func (c *StatementCursor) completeTexts(ctx context.Context, db queryer, rows []ServerStatement) {
	prefix := c.textPrefix()
	var again []int
	marked := false
	for i := range rows {
		r := &rows[i]
		switch {
		case cutByRead(r.SQLText, prefix) && r.Socket:
			again = append(again, i)
		case cutByRead(r.SQLText, prefix):
			r.TextCut = TextCutByRead
		case strings.HasSuffix(r.SQLText, cutMarker):
			marked = true
		}
	}
	if len(again) > 0 {
		c.readWhole(ctx, db, rows, again)
		for _, i := range again {
			marked = marked || strings.HasSuffix(rows[i].SQLText, cutMarker)
		}
	}
	if !marked {
		return
	}
	maxText := c.maxText(ctx, db)
	for i := range rows {
		if r := &rows[i]; r.TextCut == TextWhole && cutByServer(r.SQLText, maxText) {
			r.TextCut = TextCutByServer
		}
	}
}

// maxText is the server's performance_schema_max_sql_text_length, read
// once (the default when the server does not say).
func (c *StatementCursor) maxText(ctx context.Context, db queryer) int {
	if c.maxSQLText > 0 {
		return c.maxSQLText
	}
	c.maxSQLText = defaultMaxSQLText
	if vars, err := variablesLike(ctx, db, []string{maxSQLTextVar}); err == nil {
		if n, err := strconv.Atoi(vars[maxSQLTextVar]); err == nil && n > 0 {
			c.maxSQLText = n
		}
	}
	return c.maxSQLText
}

// readAgainMax bounds the rows one read of whole texts asks for.
const readAgainMax = 256

// readWhole reads the whole SQL_TEXT of rows[idx] by their thread and
// event ids; a row the table no longer holds (or a failed read) keeps
// its start, marked TextCutByRead.
func (c *StatementCursor) readWhole(ctx context.Context, db queryer, rows []ServerStatement, idx []int) {
	type key struct{ thread, event uint64 }
	whole := map[key]string{}
	for start := 0; start < len(idx); start += readAgainMax {
		part := idx[start:min(start+readAgainMax, len(idx))]
		var b strings.Builder
		for k, i := range part {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "(%d,%d)", rows[i].ThreadID, rows[i].EventID)
		}
		q := Mark + " SELECT THREAD_ID, EVENT_ID, SQL_TEXT FROM performance_schema." + c.table +
			" WHERE (THREAD_ID, EVENT_ID) IN (" + b.String() + ")"
		res, err := db.QueryContext(ctx, q)
		if err != nil {
			break
		}
		for res.Next() {
			var k key
			var text []byte
			if res.Scan(&k.thread, &k.event, &text) == nil {
				whole[k] = string(text)
			}
		}
		res.Close()
	}
	for _, i := range idx {
		r := &rows[i]
		if text, ok := whole[key{r.ThreadID, r.EventID}]; ok && len(text) >= len(r.SQLText) {
			r.SQLText = text
		} else {
			r.TextCut = TextCutByRead
		}
	}
}
