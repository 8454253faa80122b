// Command ignorescancel goes on deleting after its Delete call is cancelled. gRPC ends the call
// on the daemon's side at once, so only the store shows it.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{IgnoreCancel: true}}) }
