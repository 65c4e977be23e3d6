package watch

import (
	"fmt"
	"net"
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
