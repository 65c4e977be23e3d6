//go:build linux

package capture

import (
	"context"
	"fmt"
	"os"

	"github.com/gapscope/gapscope/internal/event"
)

// Source is a live capture: Run until its context ends, then the counts.
type Source interface {
	Run(ctx context.Context, emit func(*event.Statement)) (Stats, error)
	Close() error
	// Describe says which capture runs, for the report.
	Describe() string
}

// Live capture sources (LiveOptions.Source, GAPSCOPE_CAPTURE).
const (
	// SourcePacket is the AF_PACKET ring: every byte of every packet.
	SourcePacket = "packet"
	// SourceEBPF is the header-only eBPF capture (ebpfsource.go); opening
	// it fails where the kernel or the capabilities do not allow it.
	SourceEBPF = "ebpf"
	// SourceAuto is eBPF where it opens, the AF_PACKET ring otherwise
	// (the report says which and why).
	SourceAuto = "auto"
	// DefaultSource is the source when neither the option nor the
	// environment names one.
	DefaultSource = SourcePacket
	// SourceEnv names the source when LiveOptions.Source is empty, so that
	// test suites can run each.
	SourceEnv = "GAPSCOPE_CAPTURE"
)

// SourceOf is the source name: s, else GAPSCOPE_CAPTURE, else the default.
func SourceOf(s string) string {
	if s == "" {
		s = os.Getenv(SourceEnv)
	}
	if s == "" {
		s = DefaultSource
	}
	return s
}

// OpenSource opens the live capture opts.Source names on iface.
func OpenSource(iface string, opts LiveOptions) (Source, error) {
	switch src := SourceOf(opts.Source); src {
	case SourcePacket:
		return OpenLive(iface, opts)
	case SourceEBPF:
		return OpenEBPF(iface, opts)
	case SourceAuto:
		e, err := OpenEBPF(iface, opts)
		if err == nil {
			return e, nil
		}
		l, lerr := OpenLive(iface, opts)
		if lerr != nil {
			return nil, lerr
		}
		l.fallback = fmt.Sprintf("eBPF capture unavailable: %v", err)
		return l, nil
	default:
		return nil, fmt.Errorf("capture source %q: want auto, ebpf or packet", src)
	}
}
