package collect

import "testing"

// Synthetic rounds against a known origin: the server starts each marker
// somewhere inside our round trip.
func TestFitOriginKnownTruth(t *testing.T) {
	const origin = int64(1_795_000_000_000_000_000) // ns
	mk := func(beforeNS, rttNS, startAfterSendNS int64) bracket {
		startWall := beforeNS + startAfterSendNS
		return bracket{beforeNS: beforeNS, afterNS: beforeNS + rttNS, startNS: startWall - origin, serverNowNS: startWall}
	}
	rounds := []bracket{
		mk(origin+1_000_000, 400_000, 150_000), // slow round: 400 µs
		mk(origin+2_000_000, 120_000, 50_000),  // tightest: 120 µs
		mk(origin+3_000_000, 300_000, 100_000),
	}
	c := fitOrigin(rounds)
	if c.ErrorUS > 60 {
		t.Errorf("ErrorUS = %d, want ≤ half the tightest round trip (60)", c.ErrorUS)
	}
	if d := c.OriginUS - origin/1000; d < -c.ErrorUS || d > c.ErrorUS {
		t.Errorf("origin off by %d µs, beyond its error %d", d, c.ErrorUS)
	}
	if c.Samples != 3 {
		t.Errorf("Samples = %d", c.Samples)
	}
	if c.ServerOffsetUS < -c.ErrorUS || c.ServerOffsetUS > c.ErrorUS {
		t.Errorf("ServerOffsetUS = %d for a server on our clock", c.ServerOffsetUS)
	}
}

// Intersecting consistent rounds beats the best single one.
func TestFitOriginIntersects(t *testing.T) {
	const origin = int64(1e18)
	a := bracket{beforeNS: origin + 1000, afterNS: origin + 101_000, startNS: 80_000 - 0} // origin in [o-79000, o+21000]
	a.startNS = a.beforeNS + 60_000 - origin                                              // started 60 µs after send
	b := bracket{beforeNS: origin + 500_000, afterNS: origin + 600_000}
	b.startNS = b.beforeNS + 30_000 - origin // started 30 µs after send
	c := fitOrigin([]bracket{a, b})
	// a bounds origin to [o-60µs, o+40µs], b to [o-30µs, o+70µs]: together
	// [o-30µs, o+40µs], half-width 35 µs.
	if c.ErrorUS != 35 {
		t.Errorf("ErrorUS = %d, want 35", c.ErrorUS)
	}
	if d := c.OriginUS - origin/1000; d < -c.ErrorUS || d > c.ErrorUS {
		t.Errorf("origin off by %d µs", d)
	}
}

// Rounds that contradict each other (the clock stepped) fall back to the
// tightest single round instead of an empty intersection.
func TestFitOriginInconsistentRounds(t *testing.T) {
	a := bracket{beforeNS: 1_000_000, afterNS: 1_100_000, startNS: 500_000}
	b := bracket{beforeNS: 9_000_000, afterNS: 9_200_000, startNS: 500_000}
	c := fitOrigin([]bracket{a, b})
	if c.ErrorUS != 50 || c.OriginUS != (1_000_000-500_000+50_000)/1000 {
		t.Errorf("got %+v, want round a alone", c)
	}
}

func TestParseUnixNS(t *testing.T) {
	for in, want := range map[string]int64{
		"1795304997.094600": 1795304997_094600000, "12": 12_000_000_000, "1.5": 1_500_000_000, "": 0,
	} {
		if got := parseUnixNS(in); got != want {
			t.Errorf("parseUnixNS(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestWaitMicros(t *testing.T) {
	c := Clock{OriginUS: 1000}
	if got := c.WaitMicros(5 * PicosPerMicro); got != 1005 {
		t.Errorf("shared timer: %d", got)
	}
	c.Wait = WaitClock{Timer: "CYCLE", Set: true, OriginUS: 2000, Rate: 1.001}
	if got := c.WaitMicros(1000 * PicosPerMicro); got != 3001 {
		t.Errorf("corrected cycle timer: %d, want 3001", got)
	}
}

// Markers across a 5 ms link (10 ms round trip): each bracket is 10.3 ms
// wide; the server started each 5 ms + 100 µs after the send.
func TestFitOriginAcrossALink(t *testing.T) {
	const origin = int64(1_700_000_000_000_000_000) // ns
	var rounds []bracket
	for i := int64(0); i < 8; i++ {
		before := origin + 1_000_000_000 + i*20_000_000
		start := before + 5_100_000 - origin
		rounds = append(rounds, bracket{beforeNS: before, afterNS: before + 10_300_000, startNS: start})
	}
	local := fitOrigin(rounds)
	if local.ErrorUS < 5000 {
		t.Fatalf("uncorrected error %d us: the test's brackets are not link-wide", local.ErrorUS)
	}
	c := fitOriginAcross(rounds, 10_000_000)
	if c.ErrorUS > 150 || c.PathRTTUS != 10_000 {
		t.Errorf("error %d us, path %d us: want the bracket narrowed to the server's 300 us", c.ErrorUS, c.PathRTTUS)
	}
	if d := c.OriginUS - origin/1000; d < -c.ErrorUS || d > c.ErrorUS {
		t.Errorf("origin off by %d us, more than the claimed %d", d, c.ErrorUS)
	}
}

func TestFitOriginAcrossLeavesLocalBracketsAlone(t *testing.T) {
	rounds := []bracket{{beforeNS: 1_000_000, afterNS: 1_080_000, startNS: 500}}
	if a, b := fitOrigin(rounds), fitOriginAcross(rounds, 60_000); a.OriginUS != b.OriginUS || a.ErrorUS != b.ErrorUS || b.PathRTTUS != 60 {
		t.Errorf("local round trip changed the fit: %+v vs %+v", a, b)
	}
}
