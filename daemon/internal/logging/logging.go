// Package logging builds the daemon's root hclog logger: JSON when stderr is
// not a terminal (journald, files), human-readable text on a terminal, with
// the level from config and changeable on reload.
package logging

import (
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/term"
)

// New returns the root logger. format is "auto", "json" or "text".
func New(name, level, format string, out io.Writer) hclog.Logger {
	json := format == "json"
	if format == "auto" || format == "" {
		json = !isTerminal(out)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:            name,
		Level:           hclog.LevelFromString(level),
		Output:          out,
		JSONFormat:      json,
		IncludeLocation: false,
		TimeFormat:      "2006-01-02T15:04:05.000Z0700",
		// Plugin output and our own share the stream; keep lines whole.
		Mutex:       nil,
		DisableTime: false,
		Color:       colorFor(json, out),
	})
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func colorFor(json bool, out io.Writer) hclog.ColorOption {
	if json || os.Getenv("NO_COLOR") != "" || !isTerminal(out) {
		return hclog.ColorOff
	}
	return hclog.AutoColor
}
