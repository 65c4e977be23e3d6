package collect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// digestFields: MySQL 8.0 adds quantiles and QUERY_SAMPLE_TEXT, 8.0.28
// SUM_CPU_TIME; MariaDB has none of them.
var digestFields = []field[Digest]{
	{name: "SCHEMA_NAME", set: func(r *Digest, v []byte) { r.Schema = string(v) }},
	{name: "DIGEST", set: func(r *Digest, v []byte) { r.Digest = string(v) }},
	{name: "DIGEST_TEXT", set: func(r *Digest, v []byte) { r.DigestText = string(v) }},
	{name: "COUNT_STAR", set: func(r *Digest, v []byte) { r.CountStar = pI64(v) }},
	{name: "SUM_TIMER_WAIT", set: func(r *Digest, v []byte) { r.SumTimerWait = pU64(v) }},
	{name: "MIN_TIMER_WAIT", optional: true, set: func(r *Digest, v []byte) { r.MinTimerWait = pU64(v) }},
	{name: "AVG_TIMER_WAIT", optional: true, set: func(r *Digest, v []byte) { r.AvgTimerWait = pU64(v) }},
	{name: "MAX_TIMER_WAIT", optional: true, set: func(r *Digest, v []byte) { r.MaxTimerWait = pU64(v) }},
	{name: "SUM_LOCK_TIME", optional: true, set: func(r *Digest, v []byte) { r.SumLockTime = pU64(v) }},
	{name: "SUM_ERRORS", optional: true, set: func(r *Digest, v []byte) { r.SumErrors = pI64(v) }},
	{name: "SUM_WARNINGS", optional: true, set: func(r *Digest, v []byte) { r.SumWarnings = pI64(v) }},
	{name: "SUM_ROWS_AFFECTED", optional: true, set: func(r *Digest, v []byte) { r.SumRowsAffected = pI64(v) }},
	{name: "SUM_ROWS_SENT", optional: true, set: func(r *Digest, v []byte) { r.SumRowsSent = pI64(v) }},
	{name: "SUM_ROWS_EXAMINED", optional: true, set: func(r *Digest, v []byte) { r.SumRowsExamined = pI64(v) }},
	{name: "SUM_CREATED_TMP_DISK_TABLES", optional: true, set: func(r *Digest, v []byte) { r.SumCreatedTmpDiskTables = pI64(v) }},
	{name: "SUM_SELECT_SCAN", optional: true, set: func(r *Digest, v []byte) { r.SumSelectScan = pI64(v) }},
	{name: "SUM_NO_INDEX_USED", optional: true, set: func(r *Digest, v []byte) { r.SumNoIndexUsed = pI64(v) }},
	{name: "SUM_CPU_TIME", optional: true, set: func(r *Digest, v []byte) { r.SumCPUTime = pU64(v) }},
	{name: "QUANTILE_95", optional: true, set: func(r *Digest, v []byte) { r.Quantile95 = pU64(v) }},
	{name: "QUANTILE_99", optional: true, set: func(r *Digest, v []byte) { r.Quantile99 = pU64(v) }},
	{name: "QUANTILE_999", optional: true, set: func(r *Digest, v []byte) { r.Quantile999 = pU64(v) }},
	{name: "QUERY_SAMPLE_TEXT", optional: true, set: func(r *Digest, v []byte) { r.QuerySampleText = string(v) }},
	{name: "FIRST_SEEN", optional: true, set: func(r *Digest, v []byte) { r.FirstSeen = string(v) }},
	{name: "LAST_SEEN", optional: true, set: func(r *Digest, v []byte) { r.LastSeen = string(v) }},
}

// digestQuery builds the digest SELECT for the columns this server has.
func digestQuery(cols Columns) ([]field[Digest], string, error) {
	fields, list, err := selectList(cols, "events_statements_summary_by_digest", digestFields)
	if err != nil {
		return nil, "", err
	}
	return fields, Mark + " SELECT " + list + " FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST IS NOT NULL", nil
}

// Digests reads events_statements_summary_by_digest, leaving out
// gapscope's own monitoring statements.
func Digests(ctx context.Context, db queryer) ([]Digest, error) {
	cols, err := LoadColumns(ctx, db, "performance_schema", "events_statements_summary_by_digest")
	if err != nil {
		return nil, err
	}
	fields, q, err := digestQuery(cols)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading events_statements_summary_by_digest: %w", err)
	}
	defer rows.Close()
	raw := make([]sql.RawBytes, len(fields))
	dest := make([]any, len(fields))
	vals := make([][]byte, len(fields))
	for i := range raw {
		dest[i] = &raw[i]
	}
	var out []Digest
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading events_statements_summary_by_digest: %w", err)
		}
		for i, b := range raw {
			vals[i] = b
		}
		var d Digest
		decodeRow(fields, vals, &d, nil)
		if !isOwnDigest(d.DigestText) {
			out = append(out, d)
		}
	}
	return out, rows.Err()
}

// isOwnDigest recognises gapscope's statements by their digest text: the
// server strips comments from DIGEST_TEXT, so the marker is gone and what
// is left is the shape of our reads (instrumentation tables, SHOW GLOBAL).
// An application reading those is itself a monitor.
func isOwnDigest(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "`performance_schema` .") || strings.Contains(t, "`information_schema` .") ||
		strings.Contains(t, "gapscope_calibration") || strings.HasPrefix(t, "show global ")
}

// DigestCollector samples per-digest counters: calls and total time.
type DigestCollector struct{}

func (DigestCollector) Name() string               { return "statement_digests" }
func (DigestCollector) Supports(s ServerInfo) bool { return s.PerformanceSchema }

func (DigestCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	ds, err := Digests(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, 2*len(ds))
	for _, d := range ds {
		l := map[string]string{"digest": d.Digest, "schema": d.Schema}
		out = append(out,
			event.Sample{Name: "calls", Value: float64(d.CountStar), Labels: l},
			event.Sample{Name: "total_us", Value: float64(d.SumTimerWait) / PicosPerMicro, Labels: l})
	}
	return out, nil
}
