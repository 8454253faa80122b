// Command unnamedunreachable reports an unreachable store without naming the setting that points
// at it ("connection refused"), so the operator cannot tell which to fix.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{UnnamedUnreachable: true}})
}
