package collect

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
type WaitCursor = eventCursor[ServerWait]

// NewWaitCursor returns a cursor over events_waits_history_long or
// events_waits_history.
func NewWaitCursor(table string) *WaitCursor {
	return newEventCursor(table, "waits", waitFields,
		func(s *ServerWait) eventKey { return eventKey{s.ThreadID, s.EventID, s.EndEventID, s.TimerEnd} },
		func(s *ServerWait, clock Clock) {
			conv := clock.WaitMicros
			if s.EventName == "idle" {
				conv = clock.UnixMicros // idle runs on the MICROSECOND timer, not the wait timer
			}
			s.StartUS, s.EndUS = conv(s.TimerStart), conv(s.TimerEnd)
		})
}
