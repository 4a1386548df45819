// Command vulndb builds the Go vulnerability database that `govulncheck -db file://DIR`
// reads, from the OSV entries in the data/osv directory of the golang.org/x/vulndb
// module, which the Go module proxy serves; the database service itself is not
// reachable from every machine that runs the checks. deploy/vulncheck.sh runs it.
//
// The vulndb module has such a command (cmd/indexdb), but it reaches its
// internal/database package through internal/report and internal/derrors, which
// import go-git, gRPC, OpenTelemetry and the Google Cloud clients: on an empty module
// cache `go run` of it downloads ~160 MB of modules (~890 MB unpacked) and takes
// minutes, to re-index a few thousand JSON files. This program writes the same files
// (index/db.json, index/modules.json, index/vulns.json, ID/<id>.json, byte for byte
// as cmd/indexdb writes them, without the .gz copies govulncheck does not read for a
// local database) with the standard library and golang.org/x/mod/semver.
//
//	go run . -osv "$(go mod download -json golang.org/x/vulndb@VERSION | jq -r .Dir)/data/osv" -out DIR
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"
)

func main() {
	osvDir := flag.String("osv", "", "directory of OSV entries (data/osv of golang.org/x/vulndb)")
	out := flag.String("out", "", "directory to write the database to (replaced whole)")
	flag.Parse()
	if *osvDir == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	db, err := load(*osvDir)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeAtomic(db, *out); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "vulndb: %d entries, %d modules -> %s (%.1fs)\n",
		len(db.entries), len(db.modules), *out, time.Since(start).Seconds())
}

// writeAtomic writes the database beside out and renames it into place, so a run
// stopped half way never leaves a partial database that a later run would take as
// built.
func writeAtomic(db *database, out string) error {
	tmp := fmt.Sprintf("%s.tmp-%d", filepath.Clean(out), os.Getpid())
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := db.write(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
