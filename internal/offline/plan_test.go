package offline

import (
	"encoding/json"
	"testing"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
)

// planKeys are Plan's JSON keys written whatever the log had.
var planKeys = map[string]bool{"statements": true, "full_scan": true, "full_join": true, "tmp_table": true,
	"tmp_table_on_disk": true, "filesort": true, "filesort_on_disk": true, "qc_hit": true, "tmp_tables": true,
	"tmp_disk_tables": true, "merge_passes": true}

// TestPlanKnowsWhatTheEventHad: each engine field the slow-log event had
// (one slowlog.Engine* bit) is written in the class's plan, 0 included,
// under a key of its own: the two packages' bits agree.
func TestPlanKnowsWhatTheEventHad(t *testing.T) {
	seen := map[string]uint16{}
	for bit := uint16(1); bit != 0 && bit <= slowlog.EnginePagesPrefetched; bit <<= 1 {
		p := planOf(&slowlog.Event{EngineFields: bit})
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var engine []string
		for k := range m {
			if !planKeys[k] {
				engine = append(engine, k)
			}
		}
		if len(engine) != 1 || m[engine[0]] != 0.0 {
			t.Errorf("bit %b: engine keys %v in %s, want one, 0", bit, engine, b)
			continue
		}
		if other, dup := seen[engine[0]]; dup {
			t.Errorf("bits %b and %b both write %s", other, bit, engine[0])
		}
		seen[engine[0]] = bit
	}
	if len(seen) != 13 {
		t.Errorf("%d engine keys for the slow log's 13 engine fields: %v", len(seen), seen)
	}
	full := planOf(&slowlog.Event{InnoDBIOReadBytes: 16384, PagesPrefetched: 4,
		EngineFields: slowlog.EngineIOReadBytes | slowlog.EnginePagesPrefetched})
	if full.InnoDBIOReadBytes != 16384 || full.PagesPrefetched != 4 {
		t.Errorf("plan %+v: the added fields not carried", full)
	}
}
