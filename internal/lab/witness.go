package lab

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/netlab"
)

// witness captures on the server's side of the link, as a capture on the
// server's host would: for each statement, how long the server took from
// the request's arrival to its first answer byte. Queue reported from the
// application's side cannot truthfully exceed that; when it does, network
// transit was counted as queue.
type witness struct {
	cancel context.CancelFunc
	done   chan capture.Stats
	mu     sync.Mutex
	stmts  []event.Statement
	once   sync.Once
}

func startWitness(link *netlab.Link, port uint16) (*witness, error) {
	var live *capture.Live
	err := netlab.RunIn(link.ServerNS(), func() (err error) {
		live, err = capture.OpenLive(link.ServerDevice(), capture.LiveOptions{Options: capture.Options{Ports: []uint16{port},
			CapturePoint: capture.PointServer}, RingMB: 4})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("capturing on the server's side of the link: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &witness{cancel: cancel, done: make(chan capture.Stats, 1)}
	go func() {
		st, _ := live.Run(ctx, w.add)
		w.done <- st
	}()
	return w, nil
}

func (w *witness) add(s *event.Statement) {
	if s.User != remoteApp || s.Cmd != "COM_QUERY" {
		return
	}
	w.mu.Lock()
	w.stmts = append(w.stmts, *s)
	w.mu.Unlock()
}

// stop ends the capture and returns the statements it saw; it may be
// called again (a deferred stop after the result's).
func (w *witness) stop() []event.Statement {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stmts
}

// WitnessCheck compares the queue watch reported from the application's
// side with the server's own time seen on its side of the link.
type WitnessCheck struct {
	// Matched is how many joined statements were found on both sides.
	Matched int `json:"matched"`
	// Exceeding counts statements whose queue_us exceeds the server-side
	// time (arrival to first answer byte) by more than ExcessToleranceUS,
	// once the link's own hold of that request is taken off: transit
	// counted as queue. MaxExcessUS is the largest excess.
	Exceeding   int   `json:"exceeding"`
	MaxExcessUS int64 `json:"max_excess_us"`
	// Confirmed counts statements queued 10 ms or more whose queue the
	// server side confirms (the server really took that long to start).
	Confirmed int `json:"confirmed_queues"`
	// LinkHeld counts requests the link itself took longer than
	// ExcessToleranceUS beyond its median one-way time to carry (both
	// captures stamp with this host's clock); MaxLinkHeldUS is the
	// longest such hold. The link's forwarder is a thread of this host:
	// on a busy one it runs late at times. From the application's side
	// nothing tells such a hold from queue, so it is not counted against
	// watch; a transit watch misjudged shifts every request, not a few,
	// and the median does not excuse it.
	LinkHeld      int   `json:"link_held"`
	MaxLinkHeldUS int64 `json:"max_link_held_us"`
}

// ExcessToleranceUS is how far a queue may exceed the server-side time:
// the per-packet variation of the link's transit around the smallest
// round trip used for the decomposition.
const ExcessToleranceUS = 1000

// witnessPair is a statement seen by watch and its twin on the server's side.
type witnessPair struct{ watched, side event.Statement }

// checkWitness pairs watch's statements with the server side's, by
// connection and order (the link does not translate addresses); the
// texts must agree (both are the wire's, redacted alike).
func checkWitness(watched, serverSide []event.Statement) WitnessCheck {
	pairs := pairWitness(watched, serverSide)
	typical := medianOneWay(pairs)
	var c WitnessCheck
	for _, p := range pairs {
		s, ss := p.watched, p.side
		c.Matched++
		held := max(ss.TReqLast-s.TReqLast-typical, 0)
		if held > ExcessToleranceUS {
			c.LinkHeld++
			c.MaxLinkHeldUS = max(c.MaxLinkHeldUS, held)
		}
		excess := s.QueueUS - (ss.TRespFirst - max(ss.TReqLast, ss.TReqFirst)) - held
		c.MaxExcessUS = max(c.MaxExcessUS, excess)
		switch {
		case excess > ExcessToleranceUS:
			c.Exceeding++
		case s.QueueUS >= 10_000:
			c.Confirmed++
		}
	}
	return c
}

// pairWitness pairs the application's joined statements with their twins.
func pairWitness(watched, serverSide []event.Statement) []witnessPair {
	byConn := map[string][]event.Statement{}
	for _, s := range serverSide {
		byConn[s.Conn] = append(byConn[s.Conn], s)
	}
	seen := map[string]int{}
	var pairs []witnessPair
	for _, s := range watched {
		if s.User != remoteApp || s.Cmd != "COM_QUERY" {
			continue
		}
		i := seen[s.Conn]
		seen[s.Conn]++
		list := byConn[s.Conn]
		if !s.Joined || i >= len(list) || list[i].SQL != s.SQL {
			continue
		}
		pairs = append(pairs, witnessPair{s, list[i]})
	}
	return pairs
}

// medianOneWay is the median time the link took to carry a request's last
// byte from the application's side to the server's.
func medianOneWay(pairs []witnessPair) int64 {
	if len(pairs) == 0 {
		return 0
	}
	ways := make([]int64, len(pairs))
	for i, p := range pairs {
		ways[i] = p.side.TReqLast - p.watched.TReqLast
	}
	slices.Sort(ways)
	return ways[len(ways)/2]
}
