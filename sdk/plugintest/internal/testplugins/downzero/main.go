// Command downzero answers Count and Delete with 0 when the store cannot be reached, so
// the daemon would call a tenant erased whose data is all there.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{DownIsEmpty: true}}) }
