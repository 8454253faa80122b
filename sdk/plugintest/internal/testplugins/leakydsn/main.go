// Command leakydsn logs its DSN, password included, through a logger of its own on
// stderr (as drivers with a package-level logger do), past the SDK's scrubbing.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{LeakDSN: true}}) }
