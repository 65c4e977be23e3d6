package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SocketStat is what the kernel says of one TCP socket of the server
// (TCP_INFO through NETLINK_SOCK_DIAG, what `ss -ti` shows). RwndLimitedUS
// is the time the socket had data to send but the peer's receive window
// was full: the kernel's own count of a client that does not read.
//
// RTTUS, RTTVarUS and MinRTTUS are the kernel's smoothed round trip, its
// variation and the smallest it saw (tcpi_rtt, tcpi_rttvar, tcpi_min_rtt):
// on the application's host, its own measure of the path to the server.
type SocketStat struct {
	Local, Remote netip.AddrPort
	BytesAcked    uint64
	RwndLimitedUS uint64
	RTTUS         uint32
	RTTVarUS      uint32
	MinRTTUS      uint32
}

// ErrNoRwndLimited means the kernel's TCP_INFO is too short to carry the
// limited-time counters (Linux before 4.9).
var ErrNoRwndLimited = errors.New("the kernel's TCP_INFO has no rwnd-limited time (Linux 4.9+)")

// ServerSockets returns the established TCP sockets whose local port is
// port (IPv4 and IPv6). It needs no privilege: sock_diag shows every
// socket's TCP_INFO, as ss does.
func ServerSockets(port uint16) ([]SocketStat, error) {
	return diagSockets(port, 0)
}

// PeerSockets returns the established TCP sockets connected to remote
// port port: on the application's host, its connections to the server.
func PeerSockets(port uint16) ([]SocketStat, error) {
	return diagSockets(0, port)
}

// diagSockets dumps the established TCP sockets with local port sport or
// remote port dport (one of them zero).
func diagSockets(sport, dport uint16) ([]SocketStat, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	var out []SocketStat
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := unix.Sendto(fd, diagRequest(family, sport, dport, uint32(seq+1)), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		got, err := readDiagDump(fd, sport, dport)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// inet_diag_req_v2 and inet_diag_msg layouts (linux/inet_diag.h).
const (
	diagReqLen    = 56
	diagMsgLen    = 72
	diagInfoAttr  = 2 // INET_DIAG_INFO: struct tcp_info
	diagExtInfo   = 1 << (diagInfoAttr - 1)
	tcpEstablised = 1
)

// diagRequest builds a dump request for family's established TCP sockets
// with local port sport or remote port dport (the kernel compares a
// non-zero idiag_sport and idiag_dport in dumps too).
func diagRequest(family uint8, sport, dport uint16, seq uint32) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], seq)
	r := b[unix.NLMSG_HDRLEN:]
	r[0], r[1], r[2] = family, unix.IPPROTO_TCP, diagExtInfo
	ne.PutUint32(r[4:], 1<<tcpEstablised)
	binary.BigEndian.PutUint16(r[8:], sport)  // id.idiag_sport
	binary.BigEndian.PutUint16(r[10:], dport) // id.idiag_dport
	return b
}

func readDiagDump(fd int, sport, dport uint16) ([]SocketStat, error) {
	buf := make([]byte, 64<<10)
	var out []SocketStat
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
						return nil, fmt.Errorf("sock_diag: %w", syscall.Errno(-code))
					}
				}
				return out, nil
			}
			st, ok, err := parseDiagMsg(m.Data)
			if err != nil {
				return nil, err
			}
			if ok && (sport == 0 || st.Local.Port() == sport) && (dport == 0 || st.Remote.Port() == dport) {
				out = append(out, st)
			}
		}
	}
}

// parseDiagMsg reads one inet_diag_msg and its INET_DIAG_INFO attribute.
func parseDiagMsg(b []byte) (SocketStat, bool, error) {
	if len(b) < diagMsgLen {
		return SocketStat{}, false, nil
	}
	var st SocketStat
	family := b[0]
	sport, dport := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])
	st.Local = netip.AddrPortFrom(diagAddr(family, b[8:24]), sport)
	st.Remote = netip.AddrPortFrom(diagAddr(family, b[24:40]), dport)
	for a := b[diagMsgLen:]; len(a) >= 4; {
		l, typ := int(binary.NativeEndian.Uint16(a)), binary.NativeEndian.Uint16(a[2:])
		if l < 4 || l > len(a) {
			break
		}
		if typ == diagInfoAttr {
			info := a[4:l]
			if len(info) < tcpInfoMinLen {
				return st, false, ErrNoRwndLimited
			}
			u64 := func(off uintptr) uint64 { return binary.NativeEndian.Uint64(info[off:]) }
			u32 := func(off uintptr) uint32 { return binary.NativeEndian.Uint32(info[off:]) }
			st.BytesAcked, st.RwndLimitedUS = u64(offBytesAcked), u64(offRwnd)
			st.RTTUS, st.RTTVarUS, st.MinRTTUS = u32(offRTT), u32(offRTTVar), u32(offMinRTT)
			return st, true, nil
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return st, false, nil
}

func diagAddr(family uint8, b []byte) netip.Addr {
	if family == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	a := netip.AddrFrom16([16]byte(b[:16]))
	return a.Unmap()
}

// Offsets of the counters in struct tcp_info, as x/sys/unix lays it out.
var (
	offBytesAcked = unsafe.Offsetof(unix.TCPInfo{}.Bytes_acked)
	offRwnd       = unsafe.Offsetof(unix.TCPInfo{}.Rwnd_limited)
	offRTT        = unsafe.Offsetof(unix.TCPInfo{}.Rtt)
	offRTTVar     = unsafe.Offsetof(unix.TCPInfo{}.Rttvar)
	offMinRTT     = unsafe.Offsetof(unix.TCPInfo{}.Min_rtt)
	tcpInfoMinLen = int(offRwnd) + 8
)
