package join

// Reset forgets every connection and thread identity and the learnt clock
// offset, for a server restart: connection and thread ids start over, and
// the timers have a new origin, so what was learned before would pair new
// statements with old ones or shift them by the downtime. Pending wire
// statements are emitted unjoined and pending server rows counted
// unmatched, as at the end of a run.
func (j *Joiner) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.age.len() > 0 {
		j.expire(j.age.pop())
	}
	j.expireAnon(1<<62 - 1)
	clear(j.threads)
	clear(j.addrs)
	j.off = newOffsetEstimator(j.opts.CalibrationErrorUS)
	j.holding, j.holdDone, j.holdSince, j.moved = false, false, 0, 0
	j.retune()
}
