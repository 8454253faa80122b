// Command planmiscount plans wrongly: its plan expects one item fewer than the tenant has.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() { sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{PlanMiscounts: true}}) }
