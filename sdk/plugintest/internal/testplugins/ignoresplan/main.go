// Command ignoresplan plans, but its Delete ignores the plan fingerprint
// the daemon checked: a store changed since the check is deleted from as it is.
package main

import (
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest/internal/testplugins/kvdeleter"
)

func main() {
	sdk.ServeTenantDeleter(&kvdeleter.Deleter{Flaws: kvdeleter.Flaws{IgnorePlanFingerprint: true}})
}
