//go:build linux

package capture

import "testing"

func TestHardwareTypeOfLoopback(t *testing.T) {
	typ, err := hardwareType("lo")
	if err != nil {
		t.Skip("no lo here:", err)
	}
	if typ != arphrdLoopback {
		t.Errorf("lo has hardware type %d, want %d", typ, arphrdLoopback)
	}
	if _, err := hardwareType("no-such-if0"); err == nil {
		t.Error("a missing interface has a hardware type")
	}
}

func TestRawIPHardware(t *testing.T) {
	for typ, want := range map[int]bool{arphrdNone: true, arphrdPPP: true, arphrdRawIP: true, arphrdTunnel: true,
		arphrdSIT: true, arphrdEther: false, arphrdLoopback: false, 778: false} {
		if got := rawIPHardware(typ); got != want {
			t.Errorf("rawIPHardware(%d) = %v, want %v", typ, got, want)
		}
	}
}
