// Package mysqlproto decodes MySQL/MariaDB client/server protocol bytes as a
// passive observer: pure functions over byte slices stamped with capture
// times, no net.Conn, no allocation per packet on the hot path. A
// ConnDecoder turns the two byte streams of one TCP connection into
// Exchanges (one client command and its complete response).
package mysqlproto

// Direction of a byte stream within a connection.
type Direction uint8

const (
	ClientToServer Direction = iota
	ServerToClient
)

// ErrInfo is the content of an ERR packet.
type ErrInfo struct {
	Code  uint16
	State string
	Msg   string
}

// ConnInfo is what the handshake told us about a connection. Fields stay
// zero when the capture started after the handshake.
type ConnInfo struct {
	ServerVersion string
	ConnID        uint32
	User          string
	DB            string
	AuthPlugin    string
	ClientCaps    uint32 // capability flags the client asked for (lower 32 bits)
	ServerCaps    uint32
	MariaDBCaps   uint32 // MariaDB extended capabilities (when both sides are MariaDB)
	SeenHandshake bool
	TLS           bool // the client switched to TLS (SSL request): no SQL after that
	Compressed    bool // CLIENT_COMPRESS negotiated: payloads are zlib-framed
	DeprecateEOF  bool
	AuthOK        bool     // the server accepted the login
	LoginErr      *ErrInfo // the server refused the connection or the login
}

// Exchange is one client command and its response. The decoder reuses the
// Exchange and the byte slices it points into across calls: a Handler must
// copy whatever it keeps.
type Exchange struct {
	Cmd     byte   // COM_* code (0x03 COM_QUERY, 0x17 COM_STMT_EXECUTE, ...)
	CmdName string // "COM_QUERY", "COM_STMT_EXECUTE", ... (static strings, no allocation)
	// SQL is the statement text: the query for COM_QUERY / COM_STMT_PREPARE,
	// the prepared text for COM_STMT_EXECUTE (with '?' placeholders; see
	// Params), the schema for COM_INIT_DB, the table for COM_FIELD_LIST.
	SQL    []byte
	StmtID uint32
	// Memo, for a command on a known prepared statement, is a slot the
	// handler may fill with what it derives from SQL (its digest): it lives
	// as long as the statement and is emptied when the id gets a new text,
	// so that each execute need not derive it again. Nil otherwise.
	Memo *any
	// Params holds COM_STMT_EXECUTE bound values rendered as SQL literals
	// ('abc', 42, NULL, ...), in placeholder order; nil when unknown.
	Params [][]byte

	// Times are Unix microseconds of the first and last byte of the request
	// (client->server) and of the response (server->client). RespFirst and
	// RespLast are 0 for commands that get no response.
	ReqFirst, ReqLast   int64
	RespFirst, RespLast int64
	ReqBytes, RespBytes int64 // bytes on the wire incl. packet headers

	Rows         int64 // rows in the result set(s) (or fetched); affected rows when there was no result set
	AffectedRows uint64
	LastInsertID uint64
	Warnings     uint16
	Status       uint16 // server status flags of the final OK/EOF
	ResultSets   int    // result sets with columns: >1 for multi-statements / CALL
	Results      int    // every result (OK, ERR, EOF or result set) in the response
	Err          *ErrInfo
	NoResponse   bool // COM_QUIT, COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA
	// Stream: the command opened a stream, not a statement: a replica's
	// COM_BINLOG_DUMP / COM_BINLOG_DUMP_GTID, to which the server sends
	// binlog events (each packet 0x00 and an event) until the replica
	// disconnects, with no end marker while it waits for new events. It
	// is emitted as the stream begins (RespFirst = RespLast: its first
	// event); what the connection carries after it is the stream's, until
	// an EOF or ERR ends it (a non-blocking dump that reached the end).
	Stream     bool
	Incomplete bool // the connection ended (or a gap hit) before the response completed
	// Note is a short static explanation when something was unusual
	// ("resync after gap", "tls: no sql text", "local infile", ...).
	Note string
}

// Handler receives decoded exchanges, in order, per connection.
type Handler interface {
	OnExchange(ex *Exchange, info *ConnInfo)
}

// Options tune a ConnDecoder.
type Options struct {
	// MaxBuffered bounds the bytes kept of one client request (the default
	// is 64 MiB so that 16 MiB+ payloads still decode); a longer request is
	// decoded from its first MaxBuffered bytes and says so in Note. Server
	// packets are never buffered whole: only their first 64 KiB matter.
	MaxBuffered int
	// MidStream tells the decoder the capture began after the handshake:
	// start in resync mode, waiting for a well-formed command.
	MidStream bool
	// SkipParams: the caller shows no literals, so COM_STMT_EXECUTE's
	// parameter values are not rendered (Exchange.Params stays nil). Their
	// types are still read: later executes of the statement may omit them.
	SkipParams bool
}
