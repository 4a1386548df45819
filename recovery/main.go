// Command recovery keeps Redis recoverable from MySQL, the system of record:
//
//	recovery sink      the flow sink service: Kafka promo-grab-flow -> MySQL grab_flow
//	recovery rebuild   restore lost shards (or one promotion) from MySQL
//	recovery verify    compare Redis with MySQL; exit 1 on drift
//	recovery migrate   create the database and apply the schema migrations
//	recovery archive   move the flows of promotions ended long ago out of grab_flow
//
// It only wires the packages under internal/.
package main

import (
	"fmt"
	"os"

	"github.com/flashsale/platform/recovery/internal/cli"
)

const usage = `usage: recovery <command> [flags]

commands:
  sink      run the flow sink (Kafka promo-grab-flow -> MySQL flow log)
  rebuild   restore shards from MySQL: --shard N | --all | --missing | --promo <promoId>_<type>
  verify    compare Redis with MySQL for every live promotion; exit 1 on drift
  migrate   create the database and apply the schema migrations (as the migrator user)
  archive   move the flow rows of promotions ended over 30 days ago to grab_flow_archive

Run "recovery <command> --help" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "sink":
		os.Exit(cli.Sink(args))
	case "rebuild":
		os.Exit(cli.Rebuild(args))
	case "verify":
		os.Exit(cli.Verify(args))
	case "migrate":
		os.Exit(cli.Migrate(args))
	case "archive":
		os.Exit(cli.Archive(args))
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "recovery: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
