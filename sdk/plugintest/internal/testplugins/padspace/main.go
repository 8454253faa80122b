// Command padspace compares tenant ids ignoring trailing spaces, as MySQL's PAD SPACE
// collations do: Delete("tenant-b ") erases tenant "tenant-b".
package main

import (
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{Match: func(stored, id string) bool { return strings.TrimRight(stored, " ") == strings.TrimRight(id, " ") }}})
}
