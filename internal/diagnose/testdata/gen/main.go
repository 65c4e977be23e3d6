// Command gen dumps the global variables of a private MariaDB sandbox with
// compiled-in defaults into ../vars/mariadb-<major.minor>.json, and, with
// performance_schema on, its consumers and instrument classes into
// ../vars/mariadb-<major.minor>-ps.json. The other fixtures there are
// written by hand from the servers' documented defaults.
//
//	go run ./internal/diagnose/testdata/gen [-out internal/diagnose/testdata/vars]
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// fixture is the file format the diagnose tests read.
type fixture struct {
	Flavor      string                         `json:"flavor"`
	Version     string                         `json:"version"`
	Source      string                         `json:"source"`
	Vars        map[string]string              `json:"vars"`
	Consumers   map[string]bool                `json:"consumers,omitempty"`
	Instruments map[string]collect.Instruments `json:"instruments,omitempty"`
}

func main() {
	out := flag.String("out", "internal/diagnose/testdata/vars", "directory for the fixtures")
	flag.Parse()
	ctx := context.Background()
	for _, ps := range []bool{false, true} {
		if err := dump(ctx, *out, ps); err != nil {
			log.Fatal(err)
		}
	}
}

func dump(ctx context.Context, dir string, ps bool) error {
	var args []string
	if ps {
		args = []string{"--performance-schema=ON"}
	}
	inst, err := sandbox.Start(ctx, sandbox.Options{ServerArgs: args})
	if err != nil {
		return err
	}
	defer inst.Stop()
	db, err := inst.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	f := fixture{Flavor: "mariadb", Source: "gen: private mariadbd --no-defaults " + fmt.Sprint(args)}
	if f.Vars, err = keyValues(ctx, db, "SHOW GLOBAL VARIABLES"); err != nil {
		return err
	}
	// Paths and ports of the sandbox are not defaults; drop what differs per run.
	host, _ := os.Hostname()
	for k, v := range f.Vars {
		perHost := host != "" && (v == host || strings.HasPrefix(v, host+"-") || strings.HasPrefix(v, host+"."))
		if perHost || strings.Contains(v, inst.Dir) || k == "port" || k == "socket" || k == "server_uid" {
			delete(f.Vars, k)
		}
	}
	f.Version = f.Vars["version"]
	name := "mariadb-" + regexp.MustCompile(`^\d+\.\d+`).FindString(f.Version)
	if ps {
		name += "-ps"
		if err := readPS(ctx, db, &f); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name+".json")
	fmt.Println("writing", path)
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func keyValues(ctx context.Context, db *sql.DB, q string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		m[k.String] = v.String
	}
	return m, rows.Err()
}

func readPS(ctx context.Context, db *sql.DB, f *fixture) error {
	cons, err := keyValues(ctx, db, "SELECT NAME, ENABLED FROM performance_schema.setup_consumers")
	if err != nil {
		return err
	}
	f.Consumers = map[string]bool{}
	for k, v := range cons {
		f.Consumers[k] = v == "YES"
	}
	if f.Instruments = collect.InstrumentClasses(ctx, db); len(f.Instruments) == 0 {
		return fmt.Errorf("reading setup_instruments: no rows")
	}
	return nil
}
