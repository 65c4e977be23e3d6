package collect

import "context"

var stageFields = []field[ServerStage]{
	{name: "THREAD_ID", set: func(r *ServerStage, v []byte) { r.ThreadID = pU64(v) }},
	{name: "EVENT_ID", set: func(r *ServerStage, v []byte) { r.EventID = pU64(v) }},
	{name: "END_EVENT_ID", optional: true, set: func(r *ServerStage, v []byte) { r.EndEventID = pU64(v) }},
	{name: "EVENT_NAME", set: func(r *ServerStage, v []byte) { r.EventName = string(v) }},
	{name: "TIMER_START", set: func(r *ServerStage, v []byte) { r.TimerStart = pU64(v) }},
	{name: "TIMER_END", set: func(r *ServerStage, v []byte) { r.TimerEnd = pU64(v) }},
	{name: "TIMER_WAIT", set: func(r *ServerStage, v []byte) { r.TimerWait = pU64(v) }},
	{name: "WORK_COMPLETED", optional: true, set: func(r *ServerStage, v []byte) { r.WorkCompleted = pI64(v) }},
	{name: "WORK_ESTIMATED", optional: true, set: func(r *ServerStage, v []byte) { r.WorkEstimated = pI64(v) }},
	{name: "NESTING_EVENT_ID", optional: true, set: func(r *ServerStage, v []byte) { r.NestingEventID = pU64(v) }},
}

// StageCursor reads events_stages_history(_long) incrementally, like
// StatementCursor. Stages of gapscope's own threads are not filtered here:
// join them to statements by (THREAD_ID, NESTING_EVENT_ID).
type StageCursor = eventCursor[ServerStage]

// NewStageCursor returns a cursor over events_stages_history_long or
// events_stages_history.
func NewStageCursor(table string) *StageCursor {
	return newEventCursor(table, "stages", stageFields,
		func(s *ServerStage) eventKey { return eventKey{s.ThreadID, s.EventID, s.EndEventID, s.TimerEnd} },
		func(s *ServerStage, clock Clock) {
			s.StartUS, s.EndUS = clock.UnixMicros(s.TimerStart), clock.UnixMicros(s.TimerEnd)
		})
}

// eventCursor reads a stage or wait history table incrementally; times
// converts a row's timers once the clock has an origin.
type eventCursor[R any] struct {
	r     *historyReader[R]
	err   error
	times func(*R, Clock)
	// Lost is the running total of events lost to ring-buffer wrap.
	Lost int64
}

func newEventCursor[R any](table, kind string, fields []field[R], key func(*R) eventKey, times func(*R, Clock)) *eventCursor[R] {
	c := &eventCursor[R]{times: times}
	c.r, c.err = newHistoryReader(table, kind, fields, key, nil)
	return c
}

// Poll returns the events completed since the last Poll and the count lost.
func (c *eventCursor[R]) Poll(ctx context.Context, db queryer, clock Clock) ([]R, int64, error) {
	if c.err != nil {
		return nil, 0, c.err
	}
	rows, lost, err := c.r.read(ctx, db)
	if err != nil {
		return nil, 0, err
	}
	c.Lost += lost
	if clock.OriginUS != 0 {
		for i := range rows {
			c.times(&rows[i], clock)
		}
	}
	return rows, lost, nil
}
