// Command trimspace compares tenant ids with surrounding white space trimmed (any Unicode
// space: a no-break space too).
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: func(stored, id string) bool { return strings.TrimSpace(stored) == strings.TrimSpace(id) }}})
}
