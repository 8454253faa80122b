// Command downpermanent classes "cannot reach the store" as permanent, so the daemon would
// never retry a deletion a store restart interrupted.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{DownIsPermanent: true}})
}
