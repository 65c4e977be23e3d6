package watch

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/report"
)

// Coverage is what a run saw and joined, from both sides. Its wire
// figures are counted from the statements the tally received, so they are
// the events' own: Seen = Joined + the sum of Unjoined.
type Coverage struct {
	// Seen: statements reported (every connection on the watched ports is
	// captured); Joined, those with their server row, by table.
	Seen           int64            `json:"seen"`
	Joined         int64            `json:"joined"`
	JoinedBySource map[string]int64 `json:"joined_by_source,omitempty"`
	// Unjoined by the note that says why.
	Unjoined map[string]int64 `json:"unjoined_by_reason,omitempty"`
	// ReplicaStreams: replicas' binlog streams (COM_BINLOG_DUMP), no
	// statements; in Seen and in Unjoined under their reason
	// (replica_stream), in no latency figure.
	ReplicaStreams int64 `json:"replica_streams"`
	// Outliers: statements that stood out (the outlier rule); how many of
	// them joined.
	Outliers       int64 `json:"outliers"`
	OutliersJoined int64 `json:"outliers_joined"`
	// QueueDropped: statements captured but lost before the join (queue
	// overflow): not in Seen.
	QueueDropped int64 `json:"queue_dropped"`
	// OutputDropped: statements counted here that reached no sink (events
	// file, store, exporters) because those fell behind by a whole queue.
	OutputDropped int64 `json:"output_dropped"`
	// Server rows read (history_long's new rows plus those the targeted
	// reads fed) = joined + merged + nested + background + streams +
	// unmatched + sampled out + duplicates.
	ServerRows       int64 `json:"server_rows"`
	ServerJoined     int64 `json:"server_joined"`
	ServerMerged     int64 `json:"server_merged"`
	ServerNested     int64 `json:"server_nested"`
	ServerBackground int64 `json:"server_background"`
	// ServerStreams: rows of replicas' binlog streams (statement/com/Binlog
	// Dump, written when a replica leaves), no statements.
	ServerStreams    int64            `json:"server_streams"`
	ServerUnmatched  map[string]int64 `json:"server_unmatched,omitempty"`
	ServerSampledOut int64            `json:"server_sampled_out"`
	ServerDuplicates int64            `json:"server_duplicates"`
	// NotOnWire: server statements whose client the capture did not see
	// (a unix socket, another port), reported as server-only events, by
	// reason; NotOnWireUS is their server time.
	NotOnWire   int64            `json:"not_on_wire"`
	NotOnWireBy map[string]int64 `json:"not_on_wire_by_reason,omitempty"`
	NotOnWireUS int64            `json:"not_on_wire_server_us"`
	// ThreadsFromWire: threads that had ended before their rows were read
	// (performance_schema no longer names their connection), identified
	// from the wire statements their rows fit.
	ThreadsFromWire int64 `json:"threads_from_wire"`
}

// coverageTally counts what reaches the tally (under the tally's lock).
type coverageTally struct {
	seen, joined, outliers, outliersJoined int64
	bySource                               map[string]int64
	unjoined                               event.ReasonCounts
	unseen                                 event.ReasonCounts
	unseenUS                               int64
}

// addUnseen counts a server statement the wire did not carry.
func (c *coverageTally) addUnseen(s *event.Statement) {
	c.unseen.Add(s.Why)
	c.unseenUS += s.ServerUS
}

func (c *coverageTally) add(s *event.Statement) {
	c.seen++
	if s.Outlier {
		c.outliers++
	}
	if s.Joined {
		if c.bySource == nil {
			c.bySource = map[string]int64{}
		}
		c.joined++
		c.bySource[s.JoinSource]++
		if s.Outlier {
			c.outliersJoined++
		}
		return
	}
	c.unjoined.Add(s.Why) // decided once, in tally.add
}

// unjoinedByReason returns the unjoined counts by the reason's name.
func (c *coverageTally) unjoinedByReason() map[string]int64 {
	return c.unjoined.Map()
}

// coverage assembles the run's Coverage from the tally's tally and both
// sides' counters.
func (e *engine) coverage(js join.Stats, server ServerSideStats) Coverage {
	c := e.tally.coverage()
	c.ReplicaStreams = c.Unjoined[event.ReplicaStream.String()]
	c.QueueDropped = server.QueueDrops
	c.OutputDropped = e.tally.out.drops()
	c.ServerRows = server.Rows + server.TargetedRows
	c.ServerJoined, c.ServerMerged, c.ServerNested, c.ServerBackground = js.Joined, js.Merged, js.Nested, js.Background
	c.ServerStreams = js.Streams
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
	unjoined := maps.Clone(c.Unjoined)
	delete(unjoined, event.ReplicaStream.String()) // said apart: no statements
	if len(unjoined) > 0 {
		fmt.Fprintf(&b, "  not joined: %s\n", countList(unjoined))
	}
	if c.ReplicaStreams > 0 {
		fmt.Fprintf(&b, "  replicas: %s (COM_BINLOG_DUMP, open for the replica's life): not statements, in no latency figure\n",
			report.CountNoun(c.ReplicaStreams, "replica binlog stream", "replica binlog streams"))
	}
	if c.QueueDropped > 0 {
		fmt.Fprintf(&b, "  lost before the join (queue overflow): %d\n", c.QueueDropped)
	}
	if c.OutputDropped > 0 {
		fmt.Fprintf(&b, "  counted here but not written to the events file, store or exporters (they fell behind): %d\n", c.OutputDropped)
	}
	var unmatched int64
	for _, n := range c.ServerUnmatched {
		unmatched += n
	}
	fmt.Fprintf(&b, "server rows read %d: joined %d, merged into a multi-statement query %d, inside stored programs %d, not on the wire %d, background (or unidentified) threads %d, replicas' binlog streams %d, unmatched %d, left out of the join sample %d, duplicates of targeted reads %d\n",
		c.ServerRows, c.ServerJoined, c.ServerMerged, c.ServerNested, c.NotOnWire, c.ServerBackground, c.ServerStreams, unmatched, c.ServerSampledOut, c.ServerDuplicates)
	if c.NotOnWire > 0 {
		top := c.ServerJoined + c.NotOnWire // the server's statements watch could place
		fmt.Fprintf(&b, "  not on the captured wire: %d statements (%s), %.1f%% of the server's statements joined or placed, %s of server time: reported as server-only events\n",
			c.NotOnWire, countList(c.NotOnWireBy), 100*float64(c.NotOnWire)/float64(max(top, 1)), usText(c.NotOnWireUS))
	}
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
		parts[i] = fmt.Sprintf("%d %s", m[k], reasonPhrase(k))
	}
	return strings.Join(parts, "; ")
}

// reasonPhrase is what the text report says for a count's key: a
// reason's phrase (its sentence without its kind's lead, "not joined: ",
// which the line already says), or the key itself (a table name).
func reasonPhrase(key string) string {
	r, ok := event.ParseReason(key)
	if !ok || r == event.ReasonNone {
		return key
	}
	return r.Phrase()
}

// usText renders microseconds for the text report.
func usText(us int64) string {
	return (time.Duration(us) * time.Microsecond).Round(time.Millisecond).String()
}
