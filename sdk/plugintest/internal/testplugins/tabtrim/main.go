// Command tabtrim strips tabs and line ends around tenant ids before
// comparing, and does not check ids itself (the daemon would never send
// one with a control character): Delete("tenant-b\t") erases tenant-b.
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{NoIDCheck: true,
		Match: func(stored, id string) bool { return stored == strings.Trim(id, "\t\r\n") }}})
}
