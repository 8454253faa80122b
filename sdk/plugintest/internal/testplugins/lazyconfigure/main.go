// Command lazyconfigure does not check in Configure that the store can be reached, so a
// wrong address shows only at the first erasure.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{LazyConfigure: true}}) }
