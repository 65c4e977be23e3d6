package mysqlproto

import "fmt"

// Capability flags (lower 32 bits) of the handshake.
const (
	capLongPassword     = 1 << 0 // CLIENT_MYSQL in MariaDB: unset means MariaDB extended caps follow
	capConnectWithDB    = 1 << 3
	capCompress         = 1 << 5
	capLocalFiles       = 1 << 7
	capProtocol41       = 1 << 9
	capSSL              = 1 << 11
	capSecureConnection = 1 << 15
	capMultiStatements  = 1 << 16
	capMultiResults     = 1 << 17
	capPluginAuth       = 1 << 19
	capConnectAttrs     = 1 << 20
	capAuthLenencData   = 1 << 21
	capSessionTrack     = 1 << 23
	capDeprecateEOF     = 1 << 24
	capZstd             = 1 << 26
	capQueryAttributes  = 1 << 27
)

// MariaDB extended capabilities (bits 32..63, stored shifted down by 32).
const (
	mariaCacheMetadata = 1 << 4
)

// Server status flags of OK and EOF packets.
const (
	statusMoreResults  = 0x0008
	statusCursorExists = 0x0040
	statusStateChanged = 0x4000
)

// Command codes.
const (
	comSleep            = 0x00
	comQuit             = 0x01
	comInitDB           = 0x02
	comQuery            = 0x03
	comFieldList        = 0x04
	comStatistics       = 0x09
	comProcessKill      = 0x0c
	comPing             = 0x0e
	comChangeUser       = 0x11
	comBinlogDump       = 0x12
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comStmtReset        = 0x1a
	comSetOption        = 0x1b
	comStmtFetch        = 0x1c
	comBinlogDumpGTID   = 0x1e
	comResetConnection  = 0x1f
	comStmtBulkExecute  = 0xfa
)

// maxPacket is the largest payload of one packet; a payload of exactly this
// length continues in the next packet.
const maxPacket = 0xffffff

var knownCommands = map[byte]string{
	0x00: "COM_SLEEP", 0x01: "COM_QUIT", 0x02: "COM_INIT_DB", 0x03: "COM_QUERY",
	0x04: "COM_FIELD_LIST", 0x05: "COM_CREATE_DB", 0x06: "COM_DROP_DB", 0x07: "COM_REFRESH",
	0x08: "COM_SHUTDOWN", 0x09: "COM_STATISTICS", 0x0a: "COM_PROCESS_INFO", 0x0b: "COM_CONNECT",
	0x0c: "COM_PROCESS_KILL", 0x0d: "COM_DEBUG", 0x0e: "COM_PING", 0x0f: "COM_TIME",
	0x10: "COM_DELAYED_INSERT", 0x11: "COM_CHANGE_USER", 0x12: "COM_BINLOG_DUMP",
	0x13: "COM_TABLE_DUMP", 0x14: "COM_CONNECT_OUT", 0x15: "COM_REGISTER_SLAVE",
	0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE", 0x18: "COM_STMT_SEND_LONG_DATA",
	0x19: "COM_STMT_CLOSE", 0x1a: "COM_STMT_RESET", 0x1b: "COM_SET_OPTION", 0x1c: "COM_STMT_FETCH",
	0x1d: "COM_DAEMON", 0x1e: "COM_BINLOG_DUMP_GTID", 0x1f: "COM_RESET_CONNECTION",
	0x20: "COM_CLONE", 0xfa: "COM_STMT_BULK_EXECUTE",
}

// commandNames is filled once so that CommandName never allocates: unknown
// codes get a static "COM_UNKNOWN_0xNN" too.
var commandNames = func() (t [256]string) {
	for i := range t {
		if n, ok := knownCommands[byte(i)]; ok {
			t[i] = n
		} else {
			t[i] = fmt.Sprintf("COM_UNKNOWN_0x%02X", i)
		}
	}
	return t
}()

// CommandName returns the COM_* name of a command code ("COM_UNKNOWN_0xNN"
// for codes no server defines). The result is a static string.
func CommandName(cmd byte) string { return commandNames[cmd] }

// noResponse reports whether the server answers a command at all.
func noResponse(cmd byte) bool {
	return cmd == comQuit || cmd == comStmtClose || cmd == comStmtSendLongData
}
