package main

import (
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/spf13/pflag"
)

// addNoDefaultsFlag adds --no-defaults, the mysql client's switch for not
// reading ~/.my.cnf.
func addNoDefaultsFlag(fl *pflag.FlagSet, p *bool) {
	fl.BoolVar(p, "no-defaults", false, "do not read ~/.my.cnf (read, as the mysql client does, when --defaults-file is not given)")
}

// resolveTarget picks the defaults file as the mysql client does (the one
// given, else ~/.my.cnf unless --no-defaults) and refuses a command line
// that names no server at all: gapscope never guesses root@127.0.0.1:3306.
func resolveTarget(secrets *collect.Secrets, command, dsn, defaultsFile string, noDefaults bool) (string, error) {
	if defaultsFile == "" && !noDefaults {
		defaultsFile = collect.HomeDefaultsFile()
		// A ~/.my.cnf with no client group (a server's options, say) is no
		// mistake of this command line when the DSN names the server.
		if _, err := secrets.ReadDefaultsFile(defaultsFile); dsn != "" && err != nil {
			defaultsFile = ""
		}
	}
	if dsn == "" && defaultsFile == "" {
		return "", usagef("%s needs --dsn or --defaults-file (there is no ~/.my.cnf to read)", command)
	}
	return defaultsFile, nil
}
