package collect

import "context"

var waitFields = []field[ServerWait]{
	{name: "THREAD_ID", set: func(r *ServerWait, v []byte) { r.ThreadID = pU64(v) }},
	{name: "EVENT_ID", set: func(r *ServerWait, v []byte) { r.EventID = pU64(v) }},
	{name: "END_EVENT_ID", optional: true, set: func(r *ServerWait, v []byte) { r.EndEventID = pU64(v) }},
	{name: "EVENT_NAME", set: func(r *ServerWait, v []byte) { r.EventName = string(v) }},
	{name: "SOURCE", optional: true, set: func(r *ServerWait, v []byte) { r.Source = string(v) }},
	{name: "TIMER_START", set: func(r *ServerWait, v []byte) { r.TimerStart = pU64(v) }},
	{name: "TIMER_END", set: func(r *ServerWait, v []byte) { r.TimerEnd = pU64(v) }},
	{name: "TIMER_WAIT", set: func(r *ServerWait, v []byte) { r.TimerWait = pU64(v) }},
	{name: "SPINS", optional: true, set: func(r *ServerWait, v []byte) { r.Spins = pI64(v) }},
	{name: "OBJECT_SCHEMA", optional: true, set: func(r *ServerWait, v []byte) { r.ObjectSchema = string(v) }},
	{name: "OBJECT_NAME", optional: true, set: func(r *ServerWait, v []byte) { r.ObjectName = string(v) }},
	{name: "INDEX_NAME", optional: true, set: func(r *ServerWait, v []byte) { r.IndexName = string(v) }},
	{name: "OBJECT_TYPE", optional: true, set: func(r *ServerWait, v []byte) { r.ObjectType = string(v) }},
	{name: "NESTING_EVENT_ID", optional: true, set: func(r *ServerWait, v []byte) { r.NestingEventID = pU64(v) }},
	{name: "NESTING_EVENT_TYPE", optional: true, set: func(r *ServerWait, v []byte) { r.NestingEventType = string(v) }},
	{name: "OPERATION", optional: true, set: func(r *ServerWait, v []byte) { r.Operation = string(v) }},
	{name: "NUMBER_OF_BYTES", optional: true, set: func(r *ServerWait, v []byte) { r.NumberOfBytes = pI64(v) }},
}

// WaitCursor reads events_waits_history(_long) incrementally, like
// StatementCursor. Times are converted with Clock.WaitMicros, since waits may
// run on their own timer (CYCLE on MariaDB unless switched).
type WaitCursor struct {
	r    *historyReader[ServerWait]
	err  error
	Lost int64
}

// NewWaitCursor returns a cursor over events_waits_history_long or
// events_waits_history.
func NewWaitCursor(table string) *WaitCursor {
	c := &WaitCursor{}
	c.r, c.err = newHistoryReader(table, "waits", waitFields,
		func(s *ServerWait) eventKey { return eventKey{s.ThreadID, s.EventID, s.EndEventID, s.TimerEnd} }, nil)
	return c
}

// Poll returns the waits completed since the last Poll and the count lost.
func (c *WaitCursor) Poll(ctx context.Context, db queryer, clock Clock) ([]ServerWait, int64, error) {
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
			conv := clock.WaitMicros
			if rows[i].EventName == "idle" {
				conv = clock.UnixMicros // idle runs on the MICROSECOND timer, not the wait timer
			}
			rows[i].StartUS, rows[i].EndUS = conv(rows[i].TimerStart), conv(rows[i].TimerEnd)
		}
	}
	return rows, lost, nil
}
