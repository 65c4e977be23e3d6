//go:build linux

package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The program's attachment on kernels without tcx (before Linux 6.6): a
// clsact qdisc on the interface (added when it has none, and left there:
// other tools' filters may share it) and a cls_bpf filter in direct-action
// mode at its egress (and ingress) hook, at a priority of our own, removed
// at close. Spoken over rtnetlink by hand: no netlink library is needed
// for three messages.

// Traffic-control constants (include/uapi/linux/pkt_sched.h, pkt_cls.h).
const (
	tcHClsact      = 0xFFFFFFF1
	tcHClsactEgr   = 0xFFFFFFF3 // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)
	tcHClsactIngr  = 0xFFFFFFF2 // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)
	tcaBPFFD       = 6
	tcaBPFName     = 7
	tcaBPFFlags    = 8
	tcaBPFActDirct = 1
	clsactHandle   = 1
)

// clsactFilter is what close removes.
type clsactFilter struct {
	ifindex int
	prio    uint16
	parents []uint32
}

// clsactPrio gives each filter of this process its own priority.
var clsactPrio atomic.Uint32

// attachClsact adds the clsact qdisc if missing and one filter running the
// program fd per direction asked.
func attachClsact(ifindex, progFD int, egress, ingress bool) (*clsactFilter, error) {
	err := rtnetlink(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_EXCL,
		tcmsg(ifindex, 0xFFFF0000, tcHClsact, 0), attr(unix.TCA_KIND, cstring("clsact")))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("adding a clsact qdisc: %w", err)
	}
	f := &clsactFilter{ifindex: ifindex, prio: uint16(0xC000 + (os.Getpid()+int(clsactPrio.Add(1)))%0x3000)}
	var parents []uint32
	if egress {
		parents = append(parents, tcHClsactEgr)
	}
	if ingress {
		parents = append(parents, tcHClsactIngr)
	}
	fdAttr := make([]byte, 4)
	binary.NativeEndian.PutUint32(fdAttr, uint32(progFD))
	flags := make([]byte, 4)
	binary.NativeEndian.PutUint32(flags, tcaBPFActDirct)
	opts := append(append(attr(tcaBPFFD, fdAttr), attr(tcaBPFName, cstring("gapscope"))...), attr(tcaBPFFlags, flags)...)
	for _, parent := range parents {
		err := rtnetlink(unix.RTM_NEWTFILTER, unix.NLM_F_CREATE|unix.NLM_F_EXCL,
			tcmsg(ifindex, clsactHandle, parent, f.info()),
			append(attr(unix.TCA_KIND, cstring("bpf")), attr(unix.TCA_OPTIONS|unix.NLA_F_NESTED, opts)...))
		if err != nil {
			f.close()
			return nil, fmt.Errorf("adding a bpf filter at prio %d: %w", f.prio, err)
		}
		f.parents = append(f.parents, parent)
	}
	return f, nil
}

// info is the filter's priority and protocol (all), as tcm_info holds them.
func (f *clsactFilter) info() uint32 {
	all := uint16(unix.ETH_P_ALL)
	return uint32(f.prio)<<16 | uint32(all>>8|all<<8)
}

func (f *clsactFilter) close() {
	for _, parent := range f.parents {
		_ = rtnetlink(unix.RTM_DELTFILTER, 0, tcmsg(f.ifindex, clsactHandle, parent, f.info()), nil)
	}
	f.parents = nil
}

// tcmsg is struct tcmsg: family, 3 bytes of padding, ifindex, handle,
// parent, info.
func tcmsg(ifindex int, handle, parent, info uint32) []byte {
	b := make([]byte, 20)
	b[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:], uint32(int32(ifindex)))
	binary.NativeEndian.PutUint32(b[8:], handle)
	binary.NativeEndian.PutUint32(b[12:], parent)
	binary.NativeEndian.PutUint32(b[16:], info)
	return b
}

func cstring(s string) []byte { return append([]byte(s), 0) }

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	b := make([]byte, unix.NLA_HDRLEN, unix.NLA_HDRLEN+len(data)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(unix.NLA_HDRLEN+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// rtnetlink sends one request and waits for its acknowledgement.
func rtnetlink(typ uint16, flags uint16, body, attrs []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body)+len(attrs))
	msg = append(append(msg, body...), attrs...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return errors.New("rtnetlink: truncated reply")
			}
			if binary.NativeEndian.Uint16(b[4:]) == unix.NLMSG_ERROR {
				if l < unix.NLMSG_HDRLEN+4 {
					return errors.New("rtnetlink: truncated error")
				}
				if code := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:])); code != 0 {
					return unix.Errno(-code)
				}
				return nil
			}
			b = b[(l+3)&^3:]
		}
	}
}
