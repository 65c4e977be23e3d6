package join

import (
	"math/rand/v2"
	"testing"
)

func TestConsensusPeak(t *testing.T) {
	var c consensus
	ivs := []interval{{0, 10}, {5, 20}, {8, 9}, {30, 40}, {-5, 8}}
	best := c.peak(ivs)
	r := c.at(best, best)
	if best != 4 || r.lo != 8 || r.hi != 8 || r.ambiguous {
		t.Fatalf("best %d region %+v, want 4 at [8,8]", best, r)
	}
	if n := c.countIn(30, 35); n != 1 {
		t.Fatalf("countIn(30,35) = %d, want 1", n)
	}
	if n := c.countIn(11, 12); n != 1 {
		t.Fatalf("countIn(11,12) = %d, want 1 (only [5,20] covers it)", n)
	}
	if n := c.countIn(-100, -50); n != 0 {
		t.Fatalf("countIn outside = %d", n)
	}
	// Two separate places reach the same level: ambiguous, hull reported.
	best = c.peak([]interval{{0, 1}, {0, 1}, {100, 101}, {100, 101}})
	if r := c.at(best, best); !r.ambiguous || r.lo != 0 || r.hi != 101 {
		t.Fatalf("two peaks: %+v", r)
	}
	// Negative origins (test rows without collect's origin) sort right.
	best = c.peak([]interval{{-31, -29}, {-40, -30}, {-33, -10}})
	if r := c.at(best, best); best != 3 || r.lo != -31 || r.hi != -30 {
		t.Fatalf("negative: best %d %+v", best, r)
	}
}

// pairInterval-like evidence for a true origin: the server started each
// statement queue µs after the request and exec µs before its answer.
func honest(rng *rand.Rand, origin int64) interval {
	queue, exec := 3+rng.Int64N(40), 5+rng.Int64N(80)
	return interval{lo: origin - queue, hi: origin + exec}
}

func trackedEstimator(t *testing.T, rng *rand.Rand, origin int64) *offsetEstimator {
	t.Helper()
	o := newOffsetEstimator(10)
	for range 100 {
		o.vote(honest(rng, origin))
	}
	if changed, _ := o.decide(); !changed || !o.tracking {
		t.Fatal("100 agreeing votes did not decide")
	}
	for range 2000 {
		o.observe(honest(rng, origin))
	}
	return o
}

func TestOffsetEstimatorConverges(t *testing.T) {
	for _, origin := range []int64{-2000, -300, -50, 0, 31, 300, 2000} {
		rng := rand.New(rand.NewPCG(1, uint64(origin+5000)))
		o := trackedEstimator(t, rng, origin)
		if d := o.origin - origin; d < -5 || d > 5 || o.errUS > 10 {
			t.Errorf("origin %d: estimate %d ± %d", origin, o.origin, o.errUS)
		}
		if o.samples < offsetRing*9/10 {
			t.Errorf("origin %d: only %d samples agree", origin, o.samples)
		}
	}
}

// A burst of wrong pairs, fewer than half the ring, must not move the
// estimate; the honest pairs after it keep it where it was.
func TestOffsetEstimatorIgnoresMismatchBurst(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	o := trackedEstimator(t, rng, 31)
	before, beforeErr := o.origin, o.errUS
	for range offsetRing/2 - 10 {
		o.observe(honest(rng, 31+250+rng.Int64N(50))) // rows matched to a neighbour
		if o.origin != before {
			t.Fatalf("burst moved the estimate from %d to %d", before, o.origin)
		}
	}
	for range 200 {
		o.observe(honest(rng, 31))
	}
	if d := o.origin - before; d < -3 || d > 3 || o.errUS > beforeErr+3 {
		t.Fatalf("after burst: %d ± %d, before %d ± %d", o.origin, o.errUS, before, beforeErr)
	}
	if !o.tracking {
		t.Fatal("burst sent the estimator back to learning")
	}
}

// A clock that really stepped shows as pairs that no longer agree (they
// were made against the stale origin): the estimator gives it up and
// learns again from votes.
func TestOffsetEstimatorRelearnsAfterStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	o := trackedEstimator(t, rng, 31)
	for i := 0; o.tracking; i++ {
		if i > offsetRing+offsetEvery*(maxTrackFailures+2) {
			t.Fatal("still tracking a stale origin")
		}
		at := rng.Int64N(100_000)
		o.observe(interval{lo: at, hi: at + 20})
	}
	for range 100 {
		o.vote(honest(rng, 1031))
	}
	if changed, _ := o.decide(); !changed || o.origin < 1021 || o.origin > 1041 {
		t.Fatalf("relearnt %d (changed=%v), want ~1031", o.origin, changed)
	}
}

func TestOffsetEstimatorFollowsDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	o := trackedEstimator(t, rng, 0)
	// 1 µs every 100 pairs: 200 µs over the run.
	for i := range int64(20_000) {
		o.observe(honest(rng, i/100))
	}
	if d := o.origin - 199; d < -8 || d > 8 {
		t.Fatalf("after drift to 199: estimate %d ± %d", o.origin, o.errUS)
	}
}

// Learning decides only when one origin clearly leads: with candidates
// spread evenly (a periodic stream) it must wait.
func TestOffsetEstimatorWaitsWhenAmbiguous(t *testing.T) {
	o := newOffsetEstimator(10)
	for i := range int64(200) {
		period := int64(500)
		o.vote(interval{lo: 300 + (i%3)*period, hi: 340 + (i%3)*period})
	}
	if changed, _ := o.decide(); changed {
		t.Fatalf("decided %d on evenly split votes", o.origin)
	}
	// The claimed calibration (origin 0 here) explains none: suspect.
	o.vote(interval{lo: 300, hi: 340})
	if _, suspect := o.decide(); !suspect {
		t.Fatal("votes away from the claim did not make it suspect")
	}
}
