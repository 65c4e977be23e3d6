package collect

import (
	"context"
	"database/sql"

	"github.com/gapscope/gapscope/internal/event"
)

// InnoDBTableStats reads mysql.innodb_table_stats (InnoDB persistent
// statistics: what the optimizer believes about each table's size).
func InnoDBTableStats(ctx context.Context, db queryer) ([]TableStats, error) {
	var out []TableStats
	err := scanAll(ctx, db, "mysql.innodb_table_stats", Mark+" SELECT database_name, table_name, CAST(last_update AS CHAR), n_rows, clustered_index_size, sum_of_other_index_sizes FROM mysql.innodb_table_stats",
		func(rows *sql.Rows) error {
			var t TableStats
			err := rows.Scan(&t.Database, &t.Table, &t.LastUpdate, &t.NRows, &t.ClusteredIndexSize, &t.SumOfOtherIndexSizes)
			out = append(out, t)
			return err
		})
	return out, err
}

// InnoDBIndexStats reads mysql.innodb_index_stats (n_diff_pfxNN are the
// per-prefix cardinalities the optimizer uses; size and n_leaf_pages pages).
func InnoDBIndexStats(ctx context.Context, db queryer) ([]IndexStat, error) {
	var out []IndexStat
	err := scanAll(ctx, db, "mysql.innodb_index_stats", Mark+" SELECT database_name, table_name, index_name, CAST(last_update AS CHAR), stat_name, stat_value, sample_size, stat_description FROM mysql.innodb_index_stats",
		func(rows *sql.Rows) error {
			var s IndexStat
			var sample sql.NullInt64
			var desc sql.NullString
			err := rows.Scan(&s.Database, &s.Table, &s.Index, &s.LastUpdate, &s.StatName, &s.StatValue, &sample, &desc)
			s.SampleSize, s.StatDescription = -1, desc.String
			if sample.Valid {
				s.SampleSize = sample.Int64
			}
			out = append(out, s)
			return err
		})
	return out, err
}

// InnoDBStatsCollector samples each table's estimated row count and each
// index's cardinalities, so that a plan change can be lined up with a
// statistics change.
type InnoDBStatsCollector struct{}

func (InnoDBStatsCollector) Name() string             { return "innodb_stats" }
func (InnoDBStatsCollector) Supports(ServerInfo) bool { return true }

func (InnoDBStatsCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	tables, err := InnoDBTableStats(ctx, db)
	if err != nil {
		return nil, err
	}
	idx, err := InnoDBIndexStats(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, len(tables)+len(idx))
	for _, t := range tables {
		out = append(out, event.Sample{Name: "n_rows", Value: float64(t.NRows),
			Labels: map[string]string{"db": t.Database, "table": t.Table, "last_update": t.LastUpdate}})
	}
	for _, s := range idx {
		out = append(out, event.Sample{Name: s.StatName, Value: float64(s.StatValue),
			Labels: map[string]string{"db": s.Database, "table": s.Table, "index": s.Index, "last_update": s.LastUpdate}})
	}
	return out, nil
}
