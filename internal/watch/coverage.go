package watch

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
)

// Coverage is what a run saw and joined, from both sides. Its wire
// figures are counted from the statements the sink received, so they are
// the events' own: Seen = Joined + the sum of Unjoined.
type Coverage struct {
	// Seen: statements reported (every connection on the watched ports is
	// captured); Joined, those with their server row, by table.
	Seen           int64            `json:"seen"`
	Joined         int64            `json:"joined"`
	JoinedBySource map[string]int64 `json:"joined_by_source,omitempty"`
	// Unjoined by the note that says why.
	Unjoined map[string]int64 `json:"unjoined_by_reason,omitempty"`
	// Outliers: statements that stood out (the outlier rule); how many of
	// them joined.
	Outliers       int64 `json:"outliers"`
	OutliersJoined int64 `json:"outliers_joined"`
	// QueueDropped: statements captured but lost before the join (queue
	// overflow): not in Seen.
	QueueDropped int64 `json:"queue_dropped,omitempty"`
	// Server rows read (history_long's new rows plus those the targeted
	// reads fed) = joined + merged + nested + background + unmatched +
	// sampled out + duplicates.
	ServerRows       int64            `json:"server_rows"`
	ServerJoined     int64            `json:"server_joined"`
	ServerMerged     int64            `json:"server_merged"`
	ServerNested     int64            `json:"server_nested"`
	ServerBackground int64            `json:"server_background"`
	ServerUnmatched  map[string]int64 `json:"server_unmatched,omitempty"`
	ServerSampledOut int64            `json:"server_sampled_out"`
	ServerDuplicates int64            `json:"server_duplicates"`
	// ThreadsFromWire: threads that had ended before their rows were read
	// (performance_schema no longer names their connection), identified
	// from the wire statements their rows fit.
	ThreadsFromWire int64 `json:"threads_from_wire,omitempty"`
}

// coverageTally counts what reaches the sink (under the sink's lock).
type coverageTally struct {
	seen, joined, outliers, outliersJoined int64
	bySource, unjoined                     map[string]int64
	// pending counts the latest reasons before they reach unjoined:
	// reasons are long notes, the same few on nearly every statement,
	// and a map lookup hashes each of them whole.
	pending pendingCounts
}

// pendingCounts holds counts of a few recent keys not yet added to their
// map; comparing a key with the same string stops at its pointer.
type pendingCounts struct {
	keys [4]string
	n    [4]int64
	next int
}

func (p *pendingCounts) add(m map[string]int64, k string) {
	for i := range p.keys {
		if p.n[i] > 0 && p.keys[i] == k {
			p.n[i]++
			return
		}
	}
	i := p.next
	p.next = (p.next + 1) % len(p.keys)
	if p.n[i] > 0 {
		m[p.keys[i]] += p.n[i]
	}
	p.keys[i], p.n[i] = k, 1
}

// flush adds every pending count to m.
func (p *pendingCounts) flush(m map[string]int64) {
	for i := range p.keys {
		if p.n[i] > 0 {
			m[p.keys[i]] += p.n[i]
			p.n[i] = 0
		}
	}
}

func (c *coverageTally) add(s *event.Statement) {
	if c.bySource == nil {
		c.bySource, c.unjoined = map[string]int64{}, map[string]int64{}
	}
	c.seen++
	if s.Outlier {
		c.outliers++
	}
	if s.Joined {
		c.joined++
		c.bySource[s.JoinSource]++
		if s.Outlier {
			c.outliersJoined++
		}
		return
	}
	c.pending.add(c.unjoined, unjoinedReason(s))
}

// unjoinedByReason returns the unjoined counts, pending ones included.
func (c *coverageTally) unjoinedByReason() map[string]int64 {
	if c.unjoined != nil {
		c.pending.flush(c.unjoined)
	}
	return maps.Clone(c.unjoined)
}

// unjoinedReason is the note that says why s was not joined.
func unjoinedReason(s *event.Statement) string {
	for _, n := range s.Notes {
		if strings.HasPrefix(n, "not joined:") || strings.HasPrefix(n, "server only:") {
			return n
		}
	}
	return "not joined: no reason recorded"
}

// coverage assembles the run's Coverage from the sink's tally and both
// sides' counters.
func (e *engine) coverage(js join.Stats, server ServerSideStats) Coverage {
	e.sink.mu.Lock()
	t := &e.sink.cov
	c := Coverage{Seen: t.seen, Joined: t.joined, JoinedBySource: maps.Clone(t.bySource), Unjoined: t.unjoinedByReason(),
		Outliers: t.outliers, OutliersJoined: t.outliersJoined}
	e.sink.mu.Unlock()
	c.QueueDropped = server.QueueDrops
	c.ServerRows = server.Rows + server.TargetedRows
	c.ServerJoined, c.ServerMerged, c.ServerNested, c.ServerBackground = js.Joined, js.Merged, js.Nested, js.Background
	c.ServerUnmatched = maps.Clone(js.UnmatchedByReason)
	c.ServerSampledOut, c.ServerDuplicates = server.SampledOutRows, server.DuplicateRows
	c.ThreadsFromWire = js.ThreadsLearned
	return c
}

// Summary is the coverage in a few lines, for the text report.
func (c Coverage) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "coverage: %d statements seen (every connection captured), %d joined", c.Seen, c.Joined)
	if len(c.JoinedBySource) > 0 {
		fmt.Fprintf(&b, " (%s)", countList(c.JoinedBySource))
	}
	fmt.Fprintf(&b, "; %d stood out, %d of them joined\n", c.Outliers, c.OutliersJoined)
	if len(c.Unjoined) > 0 {
		fmt.Fprintf(&b, "  not joined: %s\n", countList(c.Unjoined))
	}
	if c.QueueDropped > 0 {
		fmt.Fprintf(&b, "  lost before the join (queue overflow): %d\n", c.QueueDropped)
	}
	var unmatched int64
	for _, n := range c.ServerUnmatched {
		unmatched += n
	}
	fmt.Fprintf(&b, "server rows read %d: joined %d, merged into a multi-statement query %d, inside stored programs %d, background (or unidentified) threads %d, unmatched %d, left out of the join sample %d, duplicates of targeted reads %d\n",
		c.ServerRows, c.ServerJoined, c.ServerMerged, c.ServerNested, c.ServerBackground, unmatched, c.ServerSampledOut, c.ServerDuplicates)
	if len(c.ServerUnmatched) > 0 {
		fmt.Fprintf(&b, "  unmatched: %s\n", countList(c.ServerUnmatched))
	}
	if c.ThreadsFromWire > 0 {
		fmt.Fprintf(&b, "  threads ended before their rows were read, identified from the wire: %d\n", c.ThreadsFromWire)
	}
	return b.String()
}

// countList renders counts by name, largest first ("12 x; 3 y").
func countList(m map[string]int64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], strings.TrimPrefix(k, "not joined: "))
	}
	return strings.Join(parts, "; ")
}
