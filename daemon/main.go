// Command lifecycled is the data-lifecycle daemon (`lifecycled run`) and its
// command-line client (every other subcommand). See README.md.
package main

import (
	"os"

	"github.com/lifecycled/lifecycled/daemon/internal/cli"
)

func main() {
	if err := run(); err != nil {
		os.Exit(cli.ExitCode(err))
	}
}

func run() error {
	return cli.Execute(os.Args[1:], os.Stdout, os.Stderr)
}
