package watch

import (
	"fmt"
	"net"
	"net/netip"
)

// pickIface returns the interface whose traffic reaches host: "lo" for a
// loopback address, else the interface holding the local address the
// kernel would route from.
func pickIface(host string) (string, error) {
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("resolving %s to choose a capture interface: %v (use --iface)", host, err)
	}
	if ips[0].IsLoopback() {
		return loopbackName()
	}
	c, err := net.Dial("udp", net.JoinHostPort(ips[0].String(), "9"))
	if err != nil {
		return "", fmt.Errorf("finding the route to %s: %w (use --iface)", host, err)
	}
	local := c.LocalAddr().(*net.UDPAddr).IP
	c.Close()
	return ifaceWith(local)
}

func loopbackName() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name, nil
		}
	}
	return "lo", nil
}

func ifaceWith(ip net.IP) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return i.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface holds %s (use --iface)", ip)
}

// localAddrs returns this host's addresses (in this network namespace), to
// tell where the capture runs relative to each connection. None when they
// cannot be read: the capture point is then unknown and no transit is
// assumed.
func localAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
