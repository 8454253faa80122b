// Command pooldeadlock holds one of four pooled connections for a whole
// Delete and takes a second for each batch: four Deletes at once wait on
// each other forever.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{PoolOfFour: true}}) }
