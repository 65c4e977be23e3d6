package join

// Self-calibration. collect converts TIMER_START to Unix time with an
// origin measured by marker queries; on a loaded host that origin can be
// off by tens to thousands of µs, more than its own error claim. On a busy
// connection statements follow each other within 10-300 µs, so a few tens
// of µs are enough to make rows fit their neighbours. Every correct pair
// bounds the true origin O of the server's timer in capture time: the
// server cannot start a statement before its last request byte nor after
// its first response byte,
//
//	ReqLast − raw ≤ O ≤ RespFirst − raw,   raw = TIMER_START in µs
//
// (its end is no bound: TIMER_END follows the send, by up to ms). Working
// with O rather than a correction of collect's origin makes the estimate
// immune to collect recalibrating mid-run.
//
// The estimator has two sources of such intervals. While it learns, every
// plausible pairing of a row with a pending wire statement of its
// connection (within SearchUS) votes; the true origin collects a vote from
// nearly every row, a wrong one only from the rows that happen to fit a
// neighbour. Once a single origin clearly leads, it tracks: each join adds
// its pair's interval to a ring, and the consensus of the ring follows
// drift. A pairing that disagrees with the majority cannot move it.

const (
	// offsetRing is how many recent joins the tracking consensus uses.
	offsetRing = 512
	// offsetEvery is how many joins pass between two tracking estimates:
	// the ring turns over once. An estimate sorts the ring's endpoints,
	// a small cost spread over its joins (docs/performance.md, "The
	// joiner's CPU"), and still follows 100 ppm of drift.
	offsetEvery = offsetRing
	// maxVotes bounds the learning votes; when full, the older half is
	// dropped (a busy stream casts dozens of votes per row: the bound
	// holds a thousand rows or so).
	maxVotes = 1 << 16
	// minVotes is how many rows must agree before learning decides.
	minVotes = 32
	// minVoteLead is how many more rows the leading origin must explain
	// than any separate rival before learning decides (at least 1/20 of
	// its own count): below it, noise in a busy stream could be the leader.
	minVoteLead = 8
	// maxTrackFailures is how many tracking estimates in a row may lack a
	// majority before the estimator goes back to learning (the clock
	// stepped, or the pairs it sees are wrong).
	maxTrackFailures = 4
)

// offsetEstimator learns the origin of the server's statement timer.
type offsetEstimator struct {
	claimErr int64 // collect's claimed calibration error (µs)
	base     int64 // collect's origin of the newest row (µs)

	have     bool  // origin is an estimate from evidence
	tracking bool  // evidence decided; joins keep it fresh
	origin   int64 // O, valid when have
	errUS    int64 // how far the true origin may lie from O
	samples  int   // intervals behind the current estimate

	votes   []interval // learning evidence
	voted   int        // votes added since the last evaluation
	suspect bool       // the last evaluation found the claim wrong
	ring    [offsetRing]interval
	ringN   int // filled slots
	ringPos int
	fresh   int // joins since the last tracking estimate
	fails   int // consecutive tracking estimates without a majority
	cons    consensus
}

func newOffsetEstimator(claimErr int64) *offsetEstimator {
	return &offsetEstimator{claimErr: claimErr, errUS: claimErr}
}

// shift returns what to subtract from a row's times (collect's Unix µs)
// to put them on the capture clock: collect's origin minus the estimate.
func (o *offsetEstimator) shift(base int64) int64 {
	if !o.have {
		return 0
	}
	return base - o.origin
}

// learning reports whether pairings should be voted on.
func (o *offsetEstimator) learning() bool { return !o.tracking }

// wantsVote thins the voting once evidence is plentiful: on a busy server
// every row fits dozens of wire statements within SearchUS, and voting on
// all of them was a large share of watch's CPU at saturation
// (docs/performance.md, "The joiner's CPU") while the estimator only needs
// a sample. seq is the item's arrival number.
func (o *offsetEstimator) wantsVote(seq uint64) bool {
	stride := 1 + uint64(len(o.votes)/voteSampleFrom)
	return seq%stride == 0
}

// voteSampleFrom is the number of votes from which only every second item
// votes (every third from twice as many, and so on).
const voteSampleFrom = 4096

func (o *offsetEstimator) vote(iv interval) {
	if len(o.votes) >= maxVotes {
		n := copy(o.votes, o.votes[len(o.votes)/2:])
		o.votes = o.votes[:n]
	}
	o.votes = append(o.votes, iv)
	o.voted++
}

// decide evaluates the votes. It returns whether the estimate changed,
// and whether the claimed calibration is suspect (some origin away from
// it explains more rows than it does), in which case matching should wait.
func (o *offsetEstimator) decide() (changed, suspect bool) {
	// Weighing costs a sort of all votes: when learning drags on (a quiet
	// or ambiguous stream), do it again only once the evidence grew by a
	// quarter.
	if o.voted == 0 || len(o.votes) == 0 || o.voted < len(o.votes)/4 {
		return false, o.suspect
	}
	o.voted = 0
	best := o.cons.peak(o.votes)
	o.suspect = o.cons.countIn(o.base-o.claimErr, o.base+o.claimErr) < best
	if best < minVotes || o.cons.at(best, best-max(minVoteLead, best/20)).ambiguous {
		return false, o.suspect
	}
	o.suspect = false
	o.adopt(o.cons.at(best, best-trackTrim(best)))
	o.tracking, o.fails = true, 0
	o.votes = o.votes[:0]
	o.ringN, o.ringPos, o.fresh = 0, 0, 0
	return true, false
}

// observe adds a joined pair's interval and re-estimates every
// offsetEvery joins. It returns whether the estimate changed.
func (o *offsetEstimator) observe(iv interval) bool {
	if !o.tracking {
		return false // joins made before the decision are no evidence
	}
	o.ring[o.ringPos] = iv
	o.ringPos = (o.ringPos + 1) % offsetRing
	o.ringN = min(o.ringN+1, offsetRing)
	if o.fresh++; o.fresh < offsetEvery {
		return false
	}
	o.fresh = 0
	best := o.cons.peak(o.ring[:o.ringN])
	if 2*best <= o.ringN {
		// No majority: the clock stepped or the pairs are wrong. After a
		// few such estimates, learn again from votes.
		if o.fails++; o.fails >= maxTrackFailures {
			o.tracking, o.fails, o.ringN, o.ringPos = false, 0, 0, 0
		}
		return false
	}
	o.fails = 0
	before, beforeErr := o.origin, o.errUS
	o.adopt(o.cons.at(best, best-trackTrim(best)))
	return o.origin != before || o.errUS != beforeErr
}

// trackTrim is how many intervals may miss the adopted region: those a µs
// of jitter pushed just off the true origin, and the odd wrong pair.
func trackTrim(best int) int { return max(1, best/64) }

// adopt takes a consensus region as the estimate: every origin in it
// agrees with the evidence. Where collect's claim overlaps it, both hold,
// so the overlap is kept (the claim is the sharper one while statements
// are long); where it does not, the claim was wrong and the evidence
// alone counts. The estimate is the middle, the error half the width.
func (o *offsetEstimator) adopt(r region) {
	lo, hi := r.lo, r.hi
	if clo, chi := o.base-o.claimErr, o.base+o.claimErr; clo <= hi && chi >= lo {
		lo, hi = max(lo, clo), min(hi, chi)
	}
	o.origin = lo + (hi-lo)/2
	o.errUS = max(hi-o.origin, 1)
	o.samples = r.count
	o.have = true
}
