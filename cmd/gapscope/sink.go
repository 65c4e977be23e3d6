package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/watch"
)

// resultCompleteBut is the error of a run whose result was printed whole
// while its events file failed (nil when it did not).
func resultCompleteBut(eventsErr error) error {
	if eventsErr == nil {
		return nil
	}
	return fmt.Errorf("the result above is complete, but: %w", eventsErr)
}

// byteSize is a --*-max-size flag: a number of bytes with an optional
// unit, KB/MB/GB (powers of 1000) or KiB/MiB/GiB (of 1024); 0: no bound.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}

func (b *byteSize) Set(v string) error {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a size (a number with KB, MB, GB, KiB, MiB or GiB)", v)
	}
	*b = byteSize(f * float64(mult))
	return nil
}

func (b *byteSize) String() string {
	for _, u := range sizeUnits[:4] {
		if n := int64(*b); n >= u.mult && n%u.mult == 0 && (n/u.mult < 1024 || u.suffix == "TiB") {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Type() string { return "size" }

// retention is a --*-retain flag: a Go duration or a number of days (7d).
type retention time.Duration

func (r *retention) Set(v string) error {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a duration (7d, 36h, 90m)", v)
		}
		*r = retention(n * float64(24*time.Hour))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration (7d, 36h, 90m)", v)
	}
	*r = retention(d)
	return nil
}

func (r *retention) String() string {
	d := time.Duration(*r)
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (r *retention) Type() string { return "duration" }

// outputsSink hands watch's statements to the run's events file and store
// (report.RunOutputs.Add), and its finished transactions to the store; it
// takes nothing when neither is open. Its Close closes them with the
// run's findings and keeps the error, which decides the exit status after
// the result (reportWatch): it is not a warning to print beside it.
type outputsSink struct {
	*report.RunOutputs
	closeErr error
}

func (o *outputsSink) Takes() watch.Takes {
	if !o.Writes() { // every statement would go through a queue and a goroutine to nothing
		return 0
	}
	return watch.TakesStatements | watch.TakesTransactions
}

func (o *outputsSink) Statement(s *event.Statement) { o.Add(s) }
func (o *outputsSink) Snapshot(*watch.Snapshot)     {}

func (o *outputsSink) Close(final *watch.Snapshot) error {
	o.closeErr = o.RunOutputs.Close(final.Findings)
	return nil
}

// txnsSink hands watch's transactions to a --txns file (written through
// every second, as --events is); without one it takes nothing.
type txnsSink struct{ f *report.EventsFile }

func (t txnsSink) Takes() watch.Takes {
	if t.f == nil {
		return 0
	}
	return watch.TakesTransactions
}

func (txnsSink) Statement(*event.Statement)         {}
func (txnsSink) Snapshot(*watch.Snapshot)           {}
func (t txnsSink) Transaction(x *event.Transaction) { t.f.WriteTxn(x) }

func (t txnsSink) Close(*watch.Snapshot) error {
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("--txns: %w", err)
	}
	return nil
}

// openTxnFile opens a --txns file ("" : none, nil).
func openTxnFile(path string) (*report.EventsFile, error) {
	f, err := report.OpenEvents(path)
	if err != nil || f == nil {
		return nil, err
	}
	f.FlushEvery(time.Second)
	return f, nil
}
