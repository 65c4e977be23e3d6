package mysqlproto

// handshakePacket drives the connection phase: the server's greeting, the
// client's handshake response (or SSL request), then authentication packets
// until the server's OK or ERR.
func (d *ConnDecoder) handshakePacket(dir Direction, p *packet) {
	switch {
	case d.phase == phaseGreeting && dir == ServerToClient:
		d.greeting(p)
	case d.phase == phaseLogin && dir == ClientToServer:
		d.login(p)
	case d.phase == phaseAuth && dir == ServerToClient:
		d.authServer(p)
	case d.phase == phaseGreeting && dir == ClientToServer:
		// The client spoke first: we missed the handshake.
		d.lostHandshake()
	}
}

// lostHandshake switches to resync: the capture began after the handshake
// although nobody said so.
func (d *ConnDecoder) lostHandshake() {
	d.enterResync(noteMidStream)
}

// greeting parses the server's Handshake v10.
func (d *ConnDecoder) greeting(p *packet) {
	b := p.payload
	if isErr(b) {
		if e, ok := parseErr(b); ok {
			d.info.LoginErr = e.toInfo()
		}
		d.phase = phaseOpaque
		return
	}
	g, ok := parseGreeting(b)
	if !ok {
		d.lostHandshake()
		return
	}
	d.info.ServerVersion = string(g.version)
	d.info.ConnID = g.connID
	d.info.ServerCaps = g.caps
	d.info.MariaDBCaps = g.mariaCaps
	d.info.AuthPlugin = string(g.plugin)
	d.phase = phaseLogin
}

type greetingPacket struct {
	version   []byte
	connID    uint32
	caps      uint32
	mariaCaps uint32 // MariaDB extended caps, when the server is MariaDB
	plugin    []byte
}

// parseGreeting reads protocol 10: version NUL, connection id, 8 bytes of
// scramble, filler, caps low, charset, status, caps high, scramble length,
// 10 reserved bytes (MariaDB: 6 + extended caps), rest of the scramble,
// plugin name.
func parseGreeting(b []byte) (greetingPacket, bool) {
	var g greetingPacket
	if len(b) < 1 || b[0] != 10 {
		return g, false
	}
	var ok bool
	pos := 1
	if g.version, pos, ok = readNul(b, pos); !ok {
		return g, false
	}
	if g.connID, pos, ok = readU32(b, pos); !ok {
		return g, false
	}
	pos += 8 + 1
	lo, pos, ok := readU16(b, pos)
	if !ok {
		return g, false
	}
	g.caps = uint32(lo)
	pos += 1 + 2 // charset, status
	hi, pos, ok := readU16(b, pos)
	if !ok {
		return g, true // a pre-4.1 style greeting: stop at the low caps
	}
	g.caps |= uint32(hi) << 16
	scrambleLen, pos, _ := readU8(b, pos)
	if g.caps&capLongPassword == 0 {
		g.mariaCaps, _, _ = readU32(b, pos+6)
	}
	pos += 10
	if g.caps&capSecureConnection != 0 {
		pos += max(13, int(scrambleLen)-8)
	}
	if g.caps&capPluginAuth != 0 && pos <= len(b) {
		g.plugin, _ = readNulOrEnd(b, pos)
	}
	return g, true
}

// login parses the client's HandshakeResponse41, or notices an SSL
// request (the same first 32 bytes and nothing else) and stops decoding.
func (d *ConnDecoder) login(p *packet) {
	b := p.payload
	caps, _, ok := readU32(b, 0)
	if !ok {
		d.lostHandshake()
		return
	}
	d.info.SeenHandshake = true
	d.info.ClientCaps = caps
	if caps&capSSL != 0 && len(b) <= 32 {
		d.info.TLS = true
		d.phase = phaseOpaque
		return
	}
	if caps&capLongPassword == 0 && d.info.ServerCaps&capLongPassword == 0 {
		mc, _, _ := readU32(b, 28)
		d.info.MariaDBCaps &= mc
	} else {
		d.info.MariaDBCaps = 0
	}
	r := parseLogin(b, caps)
	d.loginUser = append(d.loginUser[:0], r.user...)
	d.loginDB = append(d.loginDB[:0], r.db...)
	if r.plugin != nil {
		d.info.AuthPlugin = string(r.plugin)
	}
	d.info.User, d.info.DB = string(r.user), string(r.db)
	both := caps & d.info.ServerCaps
	d.info.DeprecateEOF = both&capDeprecateEOF != 0
	d.eof = eofClassic
	if d.info.DeprecateEOF {
		d.eof = eofDeprecated
	}
	d.phase = phaseAuth
}

type loginPacket struct {
	user, db, plugin []byte
}

// parseLogin reads the variable part of HandshakeResponse41 after caps,
// max packet, charset and 23 filler bytes.
func parseLogin(b []byte, caps uint32) loginPacket {
	var r loginPacket
	var ok bool
	pos := 32
	if r.user, pos, ok = readNul(b, pos); !ok {
		return r
	}
	switch {
	case caps&capAuthLenencData != 0:
		_, pos, ok = readLenEncBytes(b, pos)
	case caps&capSecureConnection != 0:
		var n byte
		n, pos, ok = readU8(b, pos)
		pos += int(n)
		ok = ok && pos <= len(b)
	default:
		_, pos, ok = readNul(b, pos)
	}
	if !ok {
		return r
	}
	if caps&capConnectWithDB != 0 {
		r.db, pos = readNulOrEnd(b, pos)
	}
	if caps&capPluginAuth != 0 && pos < len(b) {
		r.plugin, _ = readNulOrEnd(b, pos)
	}
	return r
}

// authServer follows authentication: auth switch (0xFE), more data (0x01)
// — mysql_native_password, caching_sha2_password, ed25519 and others alike —
// until OK (command phase, compression on if negotiated) or ERR.
func (d *ConnDecoder) authServer(p *packet) {
	b := p.payload
	switch {
	case len(b) == 0:
	case isErr(b):
		if e, ok := parseErr(b); ok {
			d.info.LoginErr = e.toInfo()
		}
		d.phase = phaseOpaque
	case b[0] == 0x00:
		d.phase = phaseCommand
		d.info.AuthOK = true
		d.startCompression()
	case b[0] == 0xfe:
		if plugin, _, ok := readNul(b, 1); ok {
			d.info.AuthPlugin = string(plugin)
		}
	}
}

// startCompression switches both streams to the compressed protocol once
// the login's OK has gone by, if both sides asked for it.
func (d *ConnDecoder) startCompression() {
	both := d.info.ClientCaps & d.info.ServerCaps
	if both&capCompress != 0 {
		d.info.Compressed = true
		d.cli.compressed, d.srv.compressed = true, true
		return
	}
	if both&capZstd != 0 {
		d.info.Compressed = true
		d.note = noteZstd
		d.phase = phaseOpaque
	}
}
