package capture

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Hardware types (ARPHRD_*) whose frames reach packet sockets as bare IP
// packets: no link-layer header to strip.
const (
	arphrdEther    = 1
	arphrdPPP      = 512
	arphrdRawIP    = 519
	arphrdTunnel   = 768 // IPv4 in IPv4
	arphrdLoopback = 772
	arphrdSIT      = 776   // IPv6 in IPv4
	arphrdNone     = 65534 // TUN, WireGuard
)

// rawIPHardware reports whether an interface of hardware type typ carries
// bare IP packets.
func rawIPHardware(typ int) bool {
	switch typ {
	case arphrdNone, arphrdPPP, arphrdRawIP, arphrdTunnel, arphrdSIT:
		return true
	}
	return false
}

// hardwareType returns iface's ARPHRD type. It asks the kernel through a
// socket (SIOCGIFHWADDR), which answers for the network namespace the
// caller runs in, and falls back to sysfs, which shows the namespace it
// was mounted in (a capture started in another namespace would not find
// its interface there).
func hardwareType(iface string) (int, error) {
	if typ, err := hardwareTypeIoctl(iface); err == nil {
		return typ, nil
	}
	b, err := os.ReadFile("/sys/class/net/" + iface + "/type")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func hardwareTypeIoctl(iface string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(iface)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint16()), nil // ifr_hwaddr.sa_family
}
